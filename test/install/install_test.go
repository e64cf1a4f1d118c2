// Package install tests how kubeboot is installed: hack/install.sh into a
// temporary root (what it installs, that the kubectl link is kubeboot's
// kubectl, that the uninstall script removes it all again), and the OCI
// image hack/image builds, unpacked and run.
package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const script = "../../hack/install.sh"

// run runs the install script with env added to the environment.
func run(t *testing.T, path string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", path)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestInstallIntoRoot(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	// Data a server would have left, which the uninstall script removes.
	if err := os.MkdirAll(filepath.Join(root, "var/lib/kubeboot/pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, script, "INSTALL_KUBEBOOT_ROOT="+root, "INSTALL_KUBEBOOT_BIN="+bin, "INSTALL_KUBEBOOT_EXEC=server --cluster-init")
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	binDir := filepath.Join(root, "usr/local/bin")
	if fi, err := os.Stat(filepath.Join(binDir, "kubeboot")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the binary: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(binDir, "kubectl")); err != nil || target != "kubeboot" {
		t.Errorf("kubectl link: %q, %v", target, err)
	}
	kubectl, err := exec.Command(filepath.Join(binDir, "kubectl"), "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(kubectl), "Client Version: v1.37.2") {
		t.Errorf("the installed kubectl link: %v\n%s", err, kubectl)
	}
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/kubeboot.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "ExecStart=/usr/local/bin/kubeboot server --cluster-init", "WantedBy=multi-user.target"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}

	out, err = run(t, filepath.Join(binDir, "kubeboot-uninstall.sh"), "INSTALL_KUBEBOOT_ROOT="+root)
	if err != nil {
		t.Fatalf("kubeboot-uninstall.sh: %v\n%s", err, out)
	}
	for _, gone := range []string{"usr/local/bin/kubeboot", "usr/local/bin/kubectl", "usr/local/bin/kubeboot-uninstall.sh",
		"etc/systemd/system/kubeboot.service", "var/lib/kubeboot"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("after uninstall, %s: %v", gone, err)
		}
	}
}

// Refused before anything is written: no binary given, or one that is
// not kubeboot.
func TestInstallRefusals(t *testing.T) {
	notABinary := filepath.Join(t.TempDir(), "kubeboot")
	if err := os.WriteFile(notABinary, []byte("not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bin, want string
	}{
		{"no binary", "", "INSTALL_KUBEBOOT_BIN must name"},
		{"a missing file", filepath.Join(t.TempDir(), "missing"), "no such file"},
		{"not kubeboot", notABinary, "not a kubeboot binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			out, err := run(t, script, "INSTALL_KUBEBOOT_ROOT="+root, "INSTALL_KUBEBOOT_BIN="+tc.bin)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("got %v, want a refusal saying %q:\n%s", err, tc.want, out)
			}
			if entries, _ := os.ReadDir(root); len(entries) > 0 {
				t.Errorf("a refused install wrote %d entries under the root", len(entries))
			}
		})
	}
}
