package carotation

import (
	"crypto"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/keyutil"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// newPKI makes a server's pki as a first start does: the three CAs and
// the service account key.
func newPKI(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := pki.EnsureCA(dir, "kubeboot-ca"); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.EnsureNamedCA(dir, "front-proxy-ca", "kubeboot-front-proxy-ca"); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.EnsureCA(filepath.Join(dir, "etcd"), "kubeboot-etcd-ca"); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.EnsureSigningKey(dir, pki.ServiceAccountKeyName); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, dir, name string) *pki.KeyPair {
	t.Helper()
	kp, err := pki.Load(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateReadApply: generate-ca's CAs pass Read without force; once
// applied, a leaf the new cluster CA issues verifies against the old CA
// alone (through the cross-signed certificate in its file) and against
// the new; the CA file still trusts what the old one issued; the service
// account key signs with the new key and verifies the old.
func TestGenerateReadApply(t *testing.T) {
	pkiDir := newPKI(t)
	oldCA := load(t, pkiDir, pki.CAName)
	oldLeaf, err := pki.NewClient(oldCA, "old-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	oldSA, err := keyutil.PublicKeysFromFile(filepath.Join(pkiDir, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	staged := t.TempDir()
	written, err := Generate(pkiDir, staged)
	if err != nil {
		t.Fatal(err)
	}
	if want := "server-ca.crt server-ca.key request-header-ca.crt request-header-ca.key etcd/server-ca.crt etcd/server-ca.key service.key"; strings.Join(written, " ") != want {
		t.Errorf("Generate wrote %v, want %s", written, want)
	}
	if _, err := Generate(pkiDir, staged); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second Generate into the same directory: %v, want a refusal", err)
	}
	set, notes, err := Read(staged, pkiDir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("notes for a complete cross-signed set: %v", notes)
	}
	for _, f := range []string{"ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "etcd/ca.crt", "etcd/ca.key", "sa.key"} {
		if set.Files[f] == nil {
			t.Errorf("the rotation lacks %s", f)
		}
	}
	if err := stage(pkiDir, set.Files); err != nil {
		t.Fatal(err)
	}
	if applied, err := Apply(pkiDir, time.Unix(1000, 0)); err != nil || !applied {
		t.Fatalf("Apply: %v, %v", applied, err)
	}
	if _, err := os.Stat(filepath.Join(pkiDir, PendingDir)); !os.IsNotExist(err) {
		t.Errorf("the pending directory after Apply: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pkiDir, "retired-1000", "etcd", "ca.crt")); err != nil {
		t.Errorf("the etcd CA replaced is not kept: %v", err)
	}
	if applied, err := Apply(pkiDir, time.Now()); err != nil || applied {
		t.Errorf("a second Apply: %v, %v; want nothing to take", applied, err)
	}

	newCA := load(t, pkiDir, pki.CAName)
	if newCA.Cert.Equal(oldCA.Cert) {
		t.Fatal("the cluster CA is unchanged")
	}
	leaf, err := pki.NewServing(newCA, pki.ServingSpec{CommonName: "server", DNSNames: []string{"server"}})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := pki.ParseCertificates("leaf", leaf.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	for name, root := range map[string]*x509.Certificate{"the old CA": oldCA.Cert, "the new CA": newCA.Cert} {
		roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
		roots.AddCert(root)
		for _, c := range chain[1:] {
			intermediates.AddCert(c)
		}
		if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: "server"}); err != nil {
			t.Errorf("a leaf of the new CA, against %s: %v", name, err)
		}
	}
	trusted, err := pki.ParseCertificates("ca.crt", newCA.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	for _, c := range trusted {
		roots.AddCert(c)
	}
	if _, err := oldLeaf.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a client certificate of the old CA against the new CA file: %v", err)
	}
	sa, err := keyutil.PublicKeysFromFile(filepath.Join(pkiDir, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sa) != 2 || !publicKeyEqual(sa[1], oldSA[0]) {
		t.Errorf("sa.key holds %d keys, want the new one then the old one", len(sa))
	}
}

func publicKeyEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	if ok {
		return eq.Equal(b)
	}
	return false
}

// TestReadRefuses: each way a rotation can break the cluster is refused,
// naming the file, and --force takes what it can with a note.
func TestReadRefuses(t *testing.T) {
	pkiDir := newPKI(t)
	unrelated, err := pki.NewCA("unrelated")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	current := load(t, pkiDir, pki.CAName)
	cross, err := pki.NewCrossSignedCA(current, "next")
	if err != nil {
		t.Fatal(err)
	}
	leaf := mustLeaf(t, current)
	newKey, err := pki.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		force bool
		want  string // in the error; "" for none
		note  string // in a note
	}{
		{name: "empty", files: map[string][]byte{"README": []byte("x")}, want: "holds none of k3s's CA files"},
		{name: "unrelated CA", files: map[string][]byte{"server-ca.crt": unrelated.CertPEM, "server-ca.key": unrelated.KeyPEM},
			want: "server-ca.crt is not signed by the ca in use"},
		{name: "unrelated CA, forced", force: true, files: map[string][]byte{"server-ca.crt": unrelated.CertPEM, "server-ca.key": unrelated.KeyPEM},
			note: "--force: "},
		{name: "server and client CAs differ", files: map[string][]byte{"server-ca.crt": cross.CertPEM, "server-ca.key": cross.KeyPEM,
			"client-ca.crt": other.CertPEM, "client-ca.key": other.KeyPEM}, want: "are different CAs"},
		{name: "the same CA as both", files: map[string][]byte{"server-ca.crt": cross.CertPEM, "server-ca.key": cross.KeyPEM,
			"client-ca.crt": cross.CertPEM, "client-ca.key": cross.KeyPEM}},
		{name: "a certificate without its key", files: map[string][]byte{"server-ca.crt": cross.CertPEM}, want: "has no key"},
		{name: "a key of another certificate", files: map[string][]byte{"server-ca.crt": cross.CertPEM, "server-ca.key": other.KeyPEM}, want: "does not match"},
		{name: "a leaf, not a CA", files: map[string][]byte{"server-ca.crt": leaf.CertPEM, "server-ca.key": leaf.KeyPEM}, want: "is not a CA certificate"},
		{name: "service.key without the current key", files: map[string][]byte{"service.key": newKey}, want: "does not hold the service account key in use"},
		{name: "service.key without the current key, forced", force: true, files: map[string][]byte{"service.key": newKey}, note: "every service account token issued so far is refused"},
		{name: "service.key not a key", files: map[string][]byte{"service.key": []byte("not a key")}, want: "service.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				write(t, filepath.Join(dir, "tls", name), data)
			}
			set, notes, err := Read(dir, pkiDir, tc.force)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Read: %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.note != "" && !strings.Contains(strings.Join(notes, "\n"), tc.note) {
				t.Errorf("notes %q, want one containing %q", notes, tc.note)
			}
			if len(set.Files) == 0 {
				t.Error("nothing to rotate")
			}
		})
	}
}

func mustLeaf(t *testing.T, ca *pki.KeyPair) *pki.KeyPair {
	t.Helper()
	kp, err := pki.NewClient(ca, "leaf", nil)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}
