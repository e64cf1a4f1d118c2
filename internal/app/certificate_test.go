package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// TestCertificateCommand: `certificate check` lists the data dir's
// certificates; `certificate rotate --service` retires the named leaf and
// refuses an unknown name, naming the flag and the known ones.
func TestCertificateCommand(t *testing.T) {
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "pki")
	ca, err := pki.EnsureCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.EnsureClient(dir, "admin", ca, "kubernetes-admin", nil); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), append([]string{"kubeboot", "certificate"}, append(args, "--data-dir", dataDir)...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("check")
	if code != 0 || !strings.Contains(out, "admin ") || !strings.Contains(out, "ca ") || strings.Count(out, " ok") != 2 {
		t.Errorf("check: exit %d, %q, stderr %q; want admin and ca, ok", code, out, errOut)
	}
	if code, _, errOut := run("rotate", "--service", "nope"); code == 0 || !strings.Contains(errOut, "--service") || !strings.Contains(errOut, "admin") {
		t.Errorf("rotate --service nope: exit %d, stderr %q; want a refusal naming --service and the known names", code, errOut)
	}
	if code, _, errOut := run("rotate", "--service", "admin"); code != 0 {
		t.Fatalf("rotate --service admin: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "admin.crt")); !os.IsNotExist(err) {
		t.Errorf("admin.crt still in pki after rotate: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.crt")); err != nil {
		t.Errorf("rotate touched the CA: %v", err)
	}
}
