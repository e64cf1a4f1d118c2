package version

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/util/compatibility"
	componentversion "k8s.io/component-base/version"
)

func TestGet(t *testing.T) {
	info := Get()
	if info.Major != "1" || info.Minor == "" {
		t.Errorf("major/minor = %q/%q, want 1/<minor>", info.Major, info.Minor)
	}
	semver := regexp.MustCompile(`^v1\.\d+\.\d+\+kubeboot\.\d+\.\d+\.\d+$`)
	if !semver.MatchString(info.GitVersion) {
		t.Errorf("gitVersion %q is not a semver with kubeboot build metadata", info.GitVersion)
	}
	if info.GitVersion != "v"+Kube()+"+kubeboot."+Kubeboot {
		t.Errorf("gitVersion %q does not carry the served Kubernetes version %q", info.GitVersion, Kube())
	}
}

// TestUpstream: upstream's components report kubeboot's version, not the
// v0.0.0-master of a build without link flags, and their compatibility
// version is the Kubernetes release kubeboot is built from.
func TestUpstream(t *testing.T) {
	want := Get()
	got := componentversion.Get()
	if got.GitVersion != want.GitVersion || got.Major != want.Major || got.Minor != want.Minor {
		t.Errorf("k8s.io/component-base/version reports %s (%s.%s), want %s (%s.%s)",
			got.GitVersion, got.Major, got.Minor, want.GitVersion, want.Major, want.Minor)
	}
	if got.GitCommit != want.GitCommit || got.BuildDate != want.BuildDate {
		t.Errorf("k8s.io/component-base/version reports commit %q built %q, want %q built %q", got.GitCommit, got.BuildDate, want.GitCommit, want.BuildDate)
	}
	v := compatibility.DefaultBuildEffectiveVersion().BinaryVersion()
	if got := fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch()); got != Kube() {
		t.Errorf("components' binary version = %s, want %s", v, Kube())
	}
}

// TestVCSStamp: a program built by `go build` in a git checkout names
// the checkout's commit, which Go records in the build information, with
// no link flags. (Go records none under `go run`, or with -buildvcs=false
// in GOFLAGS; then the version line says how to get it.)
func TestVCSStamp(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "printversion")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./testdata/printversion")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	commit, treeState, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if commit != strings.TrimSpace(string(head)) {
		t.Errorf("commit %q, want HEAD %s", commit, head)
	}
	if treeState != "clean" && treeState != "dirty" {
		t.Errorf("tree state %q, want clean or dirty", treeState)
	}
}
