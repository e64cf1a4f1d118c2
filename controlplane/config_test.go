package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// TestComplete checks what Complete resolves from the settings, each in
// one place, and the settings it refuses, each naming its flag.
func TestComplete(t *testing.T) {
	dir := t.TempDir()
	base := func() Config {
		c := NewConfig()
		c.DataDir = dir
		c.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
		c.GenericServerRun.AdvertiseAddress = net.IPv4(192, 0, 2, 1)
		return c
	}
	pkiDir := filepath.Join(dir, "pki")
	ownCert, ownKey := writeKeyPair(t)
	tests := []struct {
		name    string
		edit    func(*Config)
		check   func(*testing.T, *completedConfig)
		wantErr string
	}{
		{name: "the data dir is made absolute",
			edit: func(c *Config) { c.DataDir = "relative/dir" },
			check: func(t *testing.T, cc *completedConfig) {
				if !filepath.IsAbs(cc.DataDir) || !strings.HasSuffix(cc.DataDir, "relative/dir") {
					t.Errorf("data dir %q", cc.DataDir)
				}
			}},
		{name: "the service account signing key and verification key default to pki/sa.key",
			check: func(t *testing.T, cc *completedConfig) {
				want := filepath.Join(pkiDir, "sa.key")
				if cc.ServiceAccountSigningKeyFile != want || !slices.Equal(cc.Authentication.ServiceAccounts.KeyFiles, []string{want}) {
					t.Errorf("signing key %q, verification keys %v, want %q", cc.ServiceAccountSigningKeyFile, cc.Authentication.ServiceAccounts.KeyFiles, want)
				}
			}},
		{name: "the service account issuer follows the cluster domain",
			edit: func(c *Config) { c.Nodes.ClusterDomain = "example.org" },
			check: func(t *testing.T, cc *completedConfig) {
				if got := cc.Authentication.ServiceAccounts.Issuers; !slices.Equal(got, []string{"https://kubernetes.default.svc.example.org"}) {
					t.Errorf("issuers %v", got)
				}
			}},
		{name: "a given issuer is kept",
			edit: func(c *Config) { c.Authentication.ServiceAccounts.Issuers = []string{"https://issuer.example"} },
			check: func(t *testing.T, cc *completedConfig) {
				if got := cc.Authentication.ServiceAccounts.Issuers; !slices.Equal(got, []string{"https://issuer.example"}) {
					t.Errorf("issuers %v", got)
				}
			}},
		{name: "the serving certificate is generated in pki",
			check: func(t *testing.T, cc *completedConfig) {
				ck := cc.SecureServing.ServerCert.CertKey
				if !cc.servingCert || ck.CertFile != filepath.Join(pkiDir, "apiserver.crt") || ck.KeyFile != filepath.Join(pkiDir, "apiserver.key") {
					t.Errorf("generated %t, files %+v", cc.servingCert, ck)
				}
			}},
		{name: "a serving certificate given is not generated",
			edit: func(c *Config) {
				c.SecureServing.ServerCert.CertKey.CertFile, c.SecureServing.ServerCert.CertKey.KeyFile = ownCert, ownKey
			},
			check: func(t *testing.T, cc *completedConfig) {
				if cc.servingCert || cc.SecureServing.ServerCert.CertKey.CertFile != ownCert {
					t.Errorf("generated %t, files %+v", cc.servingCert, cc.SecureServing.ServerCert.CertKey)
				}
			}},
		{name: "the advertise address defaults to a specific bind address",
			edit: func(c *Config) {
				c.SecureServing.BindAddress = net.IPv4(198, 51, 100, 7)
				c.GenericServerRun.AdvertiseAddress = nil
			},
			check: func(t *testing.T, cc *completedConfig) {
				if cc.apiserver.AdvertiseAddress != netip.MustParseAddr("198.51.100.7") || !cc.GenericServerRun.AdvertiseAddress.Equal(net.IPv4(198, 51, 100, 7)) {
					t.Errorf("advertise address %s (group: %s)", cc.apiserver.AdvertiseAddress, cc.GenericServerRun.AdvertiseAddress)
				}
			}},
		{name: "the default Service range is kubeadm's, without a warning",
			check: func(t *testing.T, cc *completedConfig) {
				if cc.apiserver.Services.CIDRs.String() != "10.96.0.0/12" || len(cc.warnings) != 0 {
					t.Errorf("range %s, warnings %q", cc.apiserver.Services.CIDRs, cc.warnings)
				}
			}},
		{name: "port 0 is a free port",
			edit: func(c *Config) { c.SecureServing.BindPort = 0 },
			check: func(t *testing.T, cc *completedConfig) {
				if cc.SecureServing.BindPort != 0 {
					t.Errorf("port %d", cc.SecureServing.BindPort)
				}
			}},
		{name: "compaction interval 0 turns compaction off",
			edit: func(c *Config) { c.Etcd.StorageConfig.CompactionInterval = 0 },
			check: func(t *testing.T, cc *completedConfig) {
				if cc.apiserver.Etcd.StorageConfig.CompactionInterval != 0 {
					t.Errorf("compaction interval %s", cc.apiserver.Etcd.StorageConfig.CompactionInterval)
				}
			}},
		{name: "a certificate without its key", edit: func(c *Config) { c.SecureServing.ServerCert.CertKey.CertFile = ownCert }, wantErr: "--tls-cert-file is set without --tls-private-key-file"},
		{name: "a key that is not the certificate's", edit: func(c *Config) {
			c.SecureServing.ServerCert.CertKey.CertFile, c.SecureServing.ServerCert.CertKey.KeyFile = ownCert, ownCert
		}, wantErr: "--tls-private-key-file"},
		{name: "unknown TLS version", edit: func(c *Config) { c.SecureServing.MinTLSVersion = "VersionTLS14" }, wantErr: "--tls-min-version"},
		{name: "unknown cipher suite", edit: func(c *Config) { c.SecureServing.CipherSuites = []string{"TLS_NOT_A_CIPHER"} }, wantErr: "--tls-cipher-suites"},
		{name: "port out of range", edit: func(c *Config) { c.SecureServing.BindPort = 65536 }, wantErr: "--secure-port 65536"},
		{name: "negative compaction interval", edit: func(c *Config) { c.Etcd.StorageConfig.CompactionInterval = -time.Second }, wantErr: "--etcd-compaction-interval"},
		{name: "loopback advertise address", edit: func(c *Config) { c.GenericServerRun.AdvertiseAddress = net.IPv4(127, 0, 0, 1) }, wantErr: "--advertise-address 127.0.0.1"},
		{name: "event TTL zero", edit: func(c *Config) { c.EventTTL = 0 }, wantErr: "--event-ttl"},
		{name: "no data dir", edit: func(c *Config) { c.DataDir = "" }, wantErr: "--data-dir"},
		{name: "a group not set", edit: func(c *Config) { c.Etcd = nil }, wantErr: "Config.Etcd is not set: start from NewConfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			if tt.edit != nil {
				tt.edit(&c)
			}
			completed, err := c.Complete()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Complete: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, completed.completedConfig)
		})
	}
}

// TestCompleteLeavesTheGroups: the caller's option groups are theirs;
// Complete resolves into copies.
func TestCompleteLeavesTheGroups(t *testing.T) {
	c := NewConfig()
	c.DataDir = t.TempDir()
	c.SecureServing.BindAddress = net.IPv4(198, 51, 100, 7)
	if _, err := c.Complete(); err != nil {
		t.Fatal(err)
	}
	if c.GenericServerRun.AdvertiseAddress != nil || len(c.Authentication.ServiceAccounts.Issuers) != 0 ||
		len(c.Authentication.ServiceAccounts.KeyFiles) != 0 || c.SecureServing.ServerCert.CertKey.CertFile != "" {
		t.Errorf("Complete changed the caller's groups: advertise %s, issuers %v, keys %v, serving certificate %q",
			c.GenericServerRun.AdvertiseAddress, c.Authentication.ServiceAccounts.Issuers,
			c.Authentication.ServiceAccounts.KeyFiles, c.SecureServing.ServerCert.CertKey.CertFile)
	}
}

// writeKeyPair writes a serving certificate and its key, signed by a CA of
// their own, and returns their paths.
func writeKeyPair(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := pki.NewServing(ca, pki.ServingSpec{CommonName: "test", DNSNames: []string{"test"}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, kp.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, kp.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestCompleteReportsCAExpiry: an expired CA in the data dir is refused,
// naming it; one within 120 days of its expiry is a warning.
func TestCompleteReportsCAExpiry(t *testing.T) {
	for _, tc := range []struct {
		name        string
		expiresIn   time.Duration
		wantErr     string
		wantWarning string
	}{
		{"expired", -time.Hour, "expired on", ""},
		{"expiring", 30 * 24 * time.Hour, "", "expires on"},
		{"expiring within 120 days", 100 * 24 * time.Hour, "", "expires on"},
		{"valid", 5 * 365 * 24 * time.Hour, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConfig()
			c.DataDir = t.TempDir()
			c.SecureServing.BindAddress = net.IPv4(198, 51, 100, 7)
			writeCA(t, filepath.Join(c.DataDir, "pki"), time.Now().Add(tc.expiresIn))
			completed, err := c.Complete()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "pki/ca.crt") {
					t.Fatalf("Complete: %v, want an error naming pki/ca.crt with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			warned := slices.ContainsFunc(completed.Warnings(), func(w string) bool { return strings.Contains(w, "pki/ca.crt") })
			if warned != (tc.wantWarning != "") {
				t.Errorf("warnings %q, want one about pki/ca.crt: %t", completed.Warnings(), tc.wantWarning != "")
			}
		})
	}
}

// writeCA writes a self-signed CA expiring at notAfter as dir/ca.crt and
// ca.key.
func writeCA(t *testing.T, dir string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "old-ca"},
		NotBefore: notAfter.Add(-10 * 365 * 24 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}
