package badinput

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestTLSVersions requires the server to refuse TLS 1.0 and 1.1
// handshakes and to accept TLS 1.2 and 1.3. A local control server that
// accepts every version proves the client really offers 1.0 and 1.1, so a
// refusal is the server's doing.
func TestTLSVersions(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addr := strings.TrimPrefix(srv.URL, "https://")
	pool := caPool(t, srv.Config.CAData)
	control, controlPool := startAnyVersionTLSServer(t)

	tests := []struct {
		name    string
		version uint16
		accept  bool
	}{
		{"TLS 1.0", tls.VersionTLS10, false},
		{"TLS 1.1", tls.VersionTLS11, false},
		{"TLS 1.2", tls.VersionTLS12, true},
		{"TLS 1.3", tls.VersionTLS13, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := handshake(control, controlPool, tt.version); err != nil || got != tt.version {
				t.Fatalf("control server: %s handshake: version %x, %v; the client cannot test this version", tt.name, got, err)
			}
			got, err := handshake(addr, pool, tt.version)
			switch {
			case tt.accept && err != nil:
				t.Errorf("%s handshake refused: %v", tt.name, err)
			case tt.accept && got != tt.version:
				t.Errorf("%s handshake negotiated version %x", tt.name, got)
			case !tt.accept && err == nil:
				t.Errorf("%s handshake accepted (version %x), want it refused", tt.name, got)
			}
		})
	}
}

// handshake dials addr and completes a TLS handshake offering exactly
// version; it returns the negotiated version.
func handshake(addr string, pool *x509.CertPool, version uint16) (uint16, error) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{
		RootCAs:    pool,
		MinVersion: version,
		MaxVersion: version,
	})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().Version, nil
}

// startAnyVersionTLSServer listens on 127.0.0.1 with TLS 1.0 and up and a
// self-signed certificate for 127.0.0.1, completing handshakes and closing.
func startAnyVersionTLSServer(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	caPEM, caKeyPEM := newCA(t, "control-ca")
	ca, caKey := parseKeyPair(t, caPEM, caKeyPEM)
	cert := issueCert(t, ca, caKey, "127.0.0.1", x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS10,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()
	return ln.Addr().String(), caPool(t, caPEM)
}

// TestAnonymousRequests requires anonymous access to exactly the health
// and version endpoints: 200 there, a 401 Status everywhere else.
func TestAnonymousRequests(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	anon := anonymousClient(t, srv.Config)
	admin := httpClientFor(t, srv.Config)

	tests := []struct {
		method, path string
		want         int
	}{
		{"GET", "/healthz", 200},
		{"GET", "/livez", 200},
		{"GET", "/readyz", 200},
		{"GET", "/readyz?verbose", 200},
		{"GET", "/version", 200},
		{"GET", "/api", 401},
		{"GET", "/apis", 401},
		{"GET", "/api/v1/namespaces", 401},
		{"GET", "/api/v1/namespaces/default/configmaps", 401},
		{"GET", "/metrics", 401},
		{"GET", "/openapi/v2", 401},
		{"GET", "/openapi/v3", 401},
		{"GET", "/apis/coordination.k8s.io/v1/leases", 401},
		{"POST", "/api/v1/namespaces", 401},
		{"DELETE", "/api/v1/namespaces/default", 401},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var body []byte
			if tt.method == "POST" {
				body = []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"anonymous"}}`)
			}
			r, err := send(anon, tt.method, srv.URL+tt.path, "", body)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != tt.want {
				t.Fatalf("anonymous %s %s: HTTP %d, want %d: %.300s", tt.method, tt.path, r.code, tt.want, r.body)
			}
			if tt.want == 401 {
				if _, err := statusOf(r); err != nil {
					t.Errorf("anonymous %s %s: %v", tt.method, tt.path, err)
				}
				// The same request with the admin certificate works: the
				// 401 is about the missing credentials.
				if tt.method == "GET" {
					r, err := send(admin, tt.method, srv.URL+tt.path, "", nil)
					if err != nil || r.code != 200 {
						t.Errorf("admin %s %s: HTTP %d, %v; want 200", tt.method, tt.path, r.code, err)
					}
				}
			}
		})
	}
	// Nothing anonymous was created or deleted.
	r, err := send(admin, "GET", srv.URL+"/api/v1/namespaces/anonymous", "", nil)
	if err != nil || r.code != 404 {
		t.Errorf("namespace anonymous: HTTP %d, %v; want 404", r.code, err)
	}
	r, err = send(admin, "GET", srv.URL+"/api/v1/namespaces/default", "", nil)
	if err != nil || r.code != 200 || strings.Contains(string(r.body), "deletionTimestamp") {
		t.Errorf("namespace default after an anonymous delete: HTTP %d, %v: %.300s", r.code, err, r.body)
	}
}

// TestBadCredentials requires 401 for client certificates the server must
// not accept and for bearer tokens it does not know.
func TestBadCredentials(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	pool := caPool(t, srv.Config.CAData)
	url := srv.URL + "/api/v1/namespaces"

	// The cluster CA, to issue certificates that are wrong in other ways.
	ca, caKey := parseKeyPair(t,
		readFile(t, filepath.Join(srv.DataDir, "pki", "ca.crt")),
		readFile(t, filepath.Join(srv.DataDir, "pki", "ca.key")))
	foreignPEM, foreignKeyPEM := newCA(t, "someone-elses-ca")
	foreign, foreignKey := parseKeyPair(t, foreignPEM, foreignKeyPEM)
	now := time.Now()

	tests := []struct {
		name   string
		certs  []tls.Certificate
		header string // Authorization
	}{
		{"certificate of another CA", []tls.Certificate{issueCert(t, foreign, foreignKey, "intruder", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(time.Hour))}, ""},
		{"expired certificate of the cluster CA", []tls.Certificate{issueCert(t, ca, caKey, "expired", x509.ExtKeyUsageClientAuth, now.Add(-48*time.Hour), now.Add(-24*time.Hour))}, ""},
		{"serving certificate of the cluster CA", []tls.Certificate{issueCert(t, ca, caKey, "server-only", x509.ExtKeyUsageServerAuth, now.Add(-time.Hour), now.Add(time.Hour))}, ""},
		{"unknown bearer token", nil, "Bearer not-a-known-token"},
		{"empty bearer token", nil, "Bearer "},
		{"basic auth", nil, "Basic YWRtaW46YWRtaW4="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tlsClient(t, pool, tt.certs...)
			r := getWithAuthorization(t, c, url, tt.header)
			if r.code != http.StatusUnauthorized {
				t.Fatalf("GET /api/v1/namespaces with %s: HTTP %d, want 401: %.300s", tt.name, r.code, r.body)
			}
			if _, err := statusOf(r); err != nil {
				t.Error(err)
			}
		})
	}

	// Control: a client certificate of the cluster CA works.
	t.Run("valid certificate of the cluster CA", func(t *testing.T) {
		c := tlsClient(t, pool, issueCert(t, ca, caKey, "valid", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(time.Hour)))
		r, err := send(c, "GET", url, "", nil)
		if err != nil || r.code != 200 {
			t.Fatalf("HTTP %d, %v; want 200: %.300s", r.code, err, r.body)
		}
	})
}

// TestTokenAuthFileAndModes starts the binary with --token-auth-file on a
// data dir it creates: a token from the file authenticates, others do
// not; the data dir is 0700, private keys and admin.kubeconfig 0600.
func TestTokenAuthFileAndModes(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	root := t.TempDir()
	tokens := filepath.Join(root, "tokens.csv")
	const token = "s3cr3t-token-0123456789abcdef"
	if err := os.WriteFile(tokens, []byte(token+`,alice,1001,"system:masters,developers"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(root, "data")
	srv := harness.StartReadyAPIServer(t, startTimeout, bin, dataDir, append(serveFlags(), "--token-auth-file", tokens)...)
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	c := tlsClient(t, caPool(t, cfg.CAData))

	t.Run("tokens", func(t *testing.T) {
		tests := []struct {
			name   string
			header string
			want   int
		}{
			{"token from the file", "Bearer " + token, 200},
			{"unknown token", "Bearer not-" + token, 401},
			{"token in upper case", "Bearer " + strings.ToUpper(token), 401},
			{"token prefix", "Bearer " + token[:10], 401},
			{"no token", "", 401},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := getWithAuthorization(t, c, cfg.Host+"/api/v1/namespaces", tt.header)
				if r.code != tt.want {
					t.Errorf("GET /api/v1/namespaces with %s: HTTP %d, want %d: %.300s", tt.name, r.code, tt.want, r.body)
				}
			})
		}
	})

	t.Run("modes", func(t *testing.T) {
		wantMode := map[string]fs.FileMode{".": 0o700, "admin.kubeconfig": 0o600}
		keys, err := filepath.Glob(filepath.Join(dataDir, "pki", "*.key"))
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) < 3 {
			t.Errorf("pki holds %d private keys (%v), want at least ca.key, apiserver.key and admin.key", len(keys), keys)
		}
		for _, k := range keys {
			rel, _ := filepath.Rel(dataDir, k)
			wantMode[rel] = 0o600
		}
		for rel, want := range wantMode {
			info, err := os.Stat(filepath.Join(dataDir, rel))
			if err != nil {
				t.Errorf("%s: %v", rel, err)
				continue
			}
			if got := info.Mode().Perm(); got != want {
				t.Errorf("%s is mode %#o, want %#o", rel, got, want)
			}
		}
	})
}

// parseKeyPair parses a PEM certificate and EC key.
func parseKeyPair(t testing.TB, certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		t.Fatal("no PEM certificate or key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		t.Fatalf("parsing the CA key (want an EC key): %v", err)
	}
	return cert, key
}

// issueCert issues a leaf certificate for cn (an IP SAN too when cn is an
// IP) signed by ca, valid from notBefore to notAfter.
func issueCert(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"system:masters"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// getWithAuthorization GETs url as JSON with c, sending the Authorization
// header when it is not empty.
func getWithAuthorization(t *testing.T, c *http.Client, url, authorization string) response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	r, err := doRequest(c, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
