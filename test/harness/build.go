package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kubeboot/kubeboot/internal/components/containerruntime/embedded"
)

// BinEnv names the environment variable holding a prebuilt kubeboot binary;
// child processes in a network namespace inherit it, since they cannot
// build (no network for the module proxy, and no need).
const BinEnv = "KUBEBOOT_BIN"

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// Main runs a test binary's tests (call it from TestMain) and then removes
// the kubeboot binary Binary built for them.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubeboot-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ScratchDir returns a directory of the test binary's own, removed when
// its tests end (TestMain must call Main), for what they build once and
// share.
func ScratchDir() (string, error) {
	if buildDir == "" {
		return "", fmt.Errorf("harness.ScratchDir needs TestMain to call harness.Main")
	}
	return os.MkdirTemp(buildDir, "scratch-")
}

// Binary returns the path of a kubeboot binary: $KUBEBOOT_BIN, or one built
// from this module once per test binary (whose TestMain must call Main).
func Binary() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		if buildDir == "" {
			buildErr = fmt.Errorf("harness.Binary needs TestMain to call harness.Main")
			return
		}
		buildPath, buildErr = Build(buildDir)
	})
	return buildPath, buildErr
}

// Build builds this module's ./cmd/kubeboot into dir, as hack/release.sh
// does: with containerd's own runc shim embedded (embedded.ShimOverlay),
// so that the tests' Pods run on the shim a release's do. It returns the
// binary's path.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	shim, err := goBuild(root, filepath.Join(dir, embedded.ShimName), embedded.ShimPackage)
	if err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(root, embedded.ShimOverlay): shim},
	})
	if err != nil {
		return "", err
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		return "", err
	}
	return goBuild(root, filepath.Join(dir, "kubeboot"), "./cmd/kubeboot", "-tags", BuildTags, "-overlay", overlayFile)
}

// BuildAt builds ./cmd/kubeboot of this module's commit (from git's
// history, as `git archive` gives it) into dir, its commit stamped as a
// release's (/version's gitCommit), and returns the binary's path. The
// binary is kept in the user's cache directory, by commit, for later runs.
func BuildAt(commit, dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("commit %s is not in the repository's history (a shallow clone?): %w", commit, err)
	}
	commit = strings.TrimSpace(string(out))
	cached := ""
	if cache, err := os.UserCacheDir(); err == nil {
		cached = filepath.Join(cache, "kubeboot-test", "kubeboot-"+commit)
		if _, err := os.Stat(cached); err == nil {
			return cached, nil
		}
	}
	src := filepath.Join(dir, "src-"+commit[:12])
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if b, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v\n%s", commit, err, b)
	}
	bin, err := goBuild(src, filepath.Join(dir, "kubeboot-"+commit[:12]), "./cmd/kubeboot", "-tags", BuildTags,
		"-ldflags", "-X github.com/kubeboot/kubeboot/internal/platform/version.gitCommit="+commit)
	if err != nil || cached == "" {
		return bin, err
	}
	// Kept for later runs when the cache takes it; used from dir if not.
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err == nil {
		if data, err := os.ReadFile(bin); err == nil && os.WriteFile(cached+".tmp", data, 0o755) == nil {
			_ = os.Rename(cached+".tmp", cached)
		}
	}
	return bin, nil
}

// BuildTags are the build tags of kubeboot's releases (hack/release.sh),
// which the tests' binary is built with too: kustomize's (in kubectl)
// without Go plugin loading, whose import of package plugin keeps every
// exported method of a cgo binary alive (+54 MB stripped; no more
// resident once running).
const BuildTags = "kustomize_disable_go_plugin_support"

// goBuild builds pkg into out from the module at root, with flags.
func goBuild(root, out, pkg string, flags ...string) (string, error) {
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), pkg)...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %v\n%s", pkg, root, err, b)
	}
	return out, nil
}

// ModuleRoot is the kubeboot module's directory (the tests run inside it).
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the kubeboot module")
	}
	return filepath.Dir(mod), nil
}

var (
	kubectlOnce sync.Once
	kubectlPath string
	kubectlErr  error
)

// Kubectl returns the path of kubeboot's kubectl (upstream's, of the same
// Kubernetes version): a link named kubectl to Binary, as a user may
// install it.
func Kubectl() (string, error) {
	kubectlOnce.Do(func() {
		bin, err := Binary()
		if err != nil {
			kubectlErr = err
			return
		}
		if buildDir == "" {
			kubectlErr = fmt.Errorf("harness.Kubectl needs TestMain to call harness.Main")
			return
		}
		kubectlPath = filepath.Join(buildDir, "kubectl")
		kubectlErr = os.Symlink(bin, kubectlPath)
	})
	return kubectlPath, kubectlErr
}
