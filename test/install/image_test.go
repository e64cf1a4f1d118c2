package install

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestImage builds the OCI image with hack/image, reads the archive back,
// unpacks its root filesystem and runs kubeboot and kubectl from it.
func TestImage(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "kubeboot-image.tar")
	build := exec.Command("go", "run", "./hack/image", "-bin", bin, "-o", archive, "-tag", "kubeboot:test")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go run ./hack/image: %v\n%s", err, out)
	}
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || !slices.Equal(cfg.Config.Entrypoint, []string{"/bin/kubeboot"}) ||
		!slices.Equal(cfg.Config.Cmd, []string{"server"}) {
		t.Errorf("image config: %s/%s, entrypoint %q, cmd %q", cfg.OS, cfg.Architecture, cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	// The labels say what the binary says of itself (a build without a
	// commit stamp has none).
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ GitVersion, GitCommit string }
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	wantCommit := info.GitCommit
	if wantCommit == "" {
		wantCommit = "unknown"
	}
	if l := cfg.Config.Labels; !strings.HasSuffix(info.GitVersion, "+kubeboot."+l["org.opencontainers.image.version"]) || l["org.opencontainers.image.revision"] != wantCommit {
		t.Errorf("image labels %v, binary's version %s commit %q", l, info.GitVersion, info.GitCommit)
	}
	if _, ok := cfg.Config.Volumes["/var/lib/kubeboot"]; !ok {
		t.Errorf("image volumes %v lack the data dir", cfg.Config.Volumes)
	}

	root := t.TempDir()
	if err := unpack(mutate.Extract(img), root); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(filepath.Join(root, "bin/kubeboot"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kubeboot ") {
		t.Errorf("kubeboot version from the image's root filesystem: %v\n%s", err, out)
	}
	out, err = exec.Command(filepath.Join(root, "bin/kubectl"), "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Client Version: v1.37.2") {
		t.Errorf("kubectl version --client from the image's root filesystem: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(root, "var/lib/kubeboot")); err != nil || !fi.IsDir() {
		t.Errorf("the data dir in the image: %v", err)
	}
}

// unpack writes a flattened image filesystem (a tar stream) under root.
func unpack(r io.ReadCloser, root string) error {
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		path := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, path)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm()); err == nil {
				_, err = io.Copy(f, tr)
				err = errors.Join(err, f.Close())
			}
		}
		if err != nil {
			return err
		}
	}
}
