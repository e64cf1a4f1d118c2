package badinput

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// TestBadCertificateCommands: each bad use of certificate rotate-ca and
// generate-ca is one line naming what is wrong, and changes nothing in
// the data dir's pki.
func TestBadCertificateCommands(t *testing.T) {
	t.Parallel()
	binary(t)
	dataDir := t.TempDir()
	pkiDir := filepath.Join(dataDir, "pki")
	ca, err := pki.EnsureCA(pkiDir, "kubeboot-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.EnsureNamedCA(pkiDir, "front-proxy-ca", "kubeboot-front-proxy-ca"); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.EnsureSigningKey(pkiDir, pki.ServiceAccountKeyName); err != nil {
		t.Fatal(err)
	}
	writeUnreachableAdminKubeconfig(t, dataDir)
	dirWith := func(files map[string][]byte) string {
		dir := t.TempDir()
		for name, data := range files {
			path := filepath.Join(dir, "tls", name)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	unrelated, err := pki.NewCA("unrelated")
	if err != nil {
		t.Fatal(err)
	}
	cross, err := pki.NewCrossSignedCA(ca, "next")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	generated := t.TempDir()
	if res := runKubeboot(t, "certificate", "generate-ca", "--path", generated, "--data-dir", dataDir); res.exitCode != 0 {
		t.Fatalf("generate-ca: %s", res.stderr)
	}
	before := snapshotDir(t, pkiDir)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"rotate-ca without --path", []string{"rotate-ca"}, `required flag(s) "path" not set`},
		{"rotate-ca from a directory that is not there", []string{"rotate-ca", "--path", missing}, "--path: stat " + missing},
		{"rotate-ca from a directory without CA files", []string{"rotate-ca", "--path", t.TempDir()}, "holds none of k3s's CA files"},
		{"rotate-ca of an unrelated CA", []string{"rotate-ca", "--path", dirWith(map[string][]byte{"server-ca.crt": unrelated.CertPEM, "server-ca.key": unrelated.KeyPEM})},
			"server-ca.crt is not signed by the ca in use"},
		{"rotate-ca of two CAs for kubeboot's one", []string{"rotate-ca", "--path", dirWith(map[string][]byte{"server-ca.crt": cross.CertPEM, "server-ca.key": cross.KeyPEM,
			"client-ca.crt": unrelated.CertPEM, "client-ca.key": unrelated.KeyPEM})}, "are different CAs"},
		{"rotate-ca of a CA without its key", []string{"rotate-ca", "--path", dirWith(map[string][]byte{"server-ca.crt": cross.CertPEM})}, "has no key"},
		{"rotate-ca without a running server", []string{"rotate-ca", "--path", generated}, "connection refused"},
		{"generate-ca without --path", []string{"generate-ca"}, `required flag(s) "path" not set`},
		{"generate-ca into a directory that has CA files", []string{"generate-ca", "--path", generated}, "exists: generate-ca writes into a directory of its own"},
		{"generate-ca on a data dir without a pki", []string{"generate-ca", "--path", t.TempDir(), "--data-dir", missing}, "--data-dir " + missing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"certificate"}, tt.args...)
			if !strings.Contains(strings.Join(args, " "), "--data-dir") {
				args = append(args, "--data-dir", dataDir)
			}
			refusedInOneLine(t, tt.want, args...)
			if after := snapshotDir(t, pkiDir); after != before {
				t.Errorf("the pki changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// snapshotDir is every file under dir with its contents' length and a
// prefix, in order.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b bytes.Buffer
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b.WriteString(path + " " + string(data) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
