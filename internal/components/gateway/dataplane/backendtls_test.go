package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// testCA is a CA made for a test, in its own directory.
func testCA(t *testing.T, name string) *pki.KeyPair {
	t.Helper()
	ca, err := pki.EnsureCA(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestBackendTLS: a backend a BackendTLS names is reached over TLS, its
// certificate checked against the CA and the server name, or the
// subject alternative names, and the Gateway's client certificate
// presented; a check that fails is a 502.
func TestBackendTLS(t *testing.T) {
	ca, other := testCA(t, "backends"), testCA(t, "other")
	serving, err := pki.NewServing(ca, pki.ServingSpec{CommonName: "abc.example.com", DNSNames: []string{"abc.example.com", "alt.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := pki.NewClient(ca, "gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := "none"
		if len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "sni=%s client=%s", r.TLS.ServerName, peer)
	}))
	pair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	backend.StartTLS()
	defer backend.Close()
	target := strings.TrimPrefix(backend.URL, "https://")

	for _, tc := range []struct {
		name string
		tls  BackendTLS
		code int
		body string
	}{
		{"the server name", BackendTLS{ServerName: "abc.example.com", CACerts: ca.CertPEM}, http.StatusOK, "sni=abc.example.com client=none"},
		{"another server name", BackendTLS{ServerName: "mismatch.example.com", CACerts: ca.CertPEM}, http.StatusBadGateway, ""},
		{"another CA", BackendTLS{ServerName: "abc.example.com", CACerts: other.CertPEM}, http.StatusBadGateway, ""},
		{"a subject alternative name, not the server name", BackendTLS{ServerName: "nothing.example.com", CACerts: ca.CertPEM,
			SubjectAltNames: []SubjectAltName{{Hostname: "other.example.com"}, {Hostname: "alt.example.com"}}}, http.StatusOK, "sni=nothing.example.com client=none"},
		{"no subject alternative name of the certificate", BackendTLS{ServerName: "abc.example.com", CACerts: ca.CertPEM,
			SubjectAltNames: []SubjectAltName{{Hostname: "other.example.com"}, {URI: "spiffe://cluster.local/ns/a/sa/b"}}}, http.StatusBadGateway, ""},
		{"subject alternative names of another CA", BackendTLS{ServerName: "abc.example.com", CACerts: other.CertPEM,
			SubjectAltNames: []SubjectAltName{{Hostname: "abc.example.com"}}}, http.StatusBadGateway, ""},
		{"a client certificate", BackendTLS{ServerName: "abc.example.com", CACerts: ca.CertPEM,
			ClientCertificate: &Certificate{Cert: client.CertPEM, Key: client.KeyPEM}}, http.StatusOK, "sni=abc.example.com client=gateway"},
		{"CA certificates that do not parse", BackendTLS{ServerName: "abc.example.com", CACerts: []byte("x")}, http.StatusBadGateway, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTransport()
			p := &Port{Port: 80, Hosts: []Host{{Routes: []Route{{Name: "r", Match: prefix("/"), Backends: []Backend{{Service: "s", Weight: 1, TLS: &tc.tls}}}}}}}
			tr.tls.bind(p)
			tr.tls.sweep()
			routes, errs := compile(p)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			h := newHandler(80, false, fixedEndpoints{addr: target}, tr)
			h.routes.Store(routes)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://app.example/", nil))
			if w.Code != tc.code || tc.body != "" && w.Body.String() != tc.body {
				t.Errorf("%d %q, want %d %q", w.Code, w.Body.String(), tc.code, tc.body)
			}
		})
	}
}

// TestTLSTransportsKept: a Config applied again keeps its backends'
// transports (their connections); one no longer applied is dropped.
func TestTLSTransportsKept(t *testing.T) {
	ca := testCA(t, "backends")
	port := func(name string) *Port {
		return &Port{Hosts: []Host{{Routes: []Route{{Backends: []Backend{{TLS: &BackendTLS{ServerName: name, CACerts: ca.CertPEM}}}}}}}}
	}
	var ts tlsTransports
	first := port("a.example")
	ts.bind(first)
	ts.sweep()
	again := port("a.example")
	ts.bind(again)
	ts.sweep()
	if a, b := first.Hosts[0].Routes[0].Backends[0].TLS.rt, again.Hosts[0].Routes[0].Backends[0].TLS.rt; a == nil || a != b {
		t.Errorf("the same BackendTLS applied again has another transport")
	}
	ts.bind(port("b.example"))
	ts.sweep()
	if len(ts.byKey) != 1 {
		t.Errorf("%d transports kept, want the one applied", len(ts.byKey))
	}
}

// TestClientValidation: a host that validates its clients' certificates
// serves a client whose certificate chains to its CAs, refuses others
// (unless it is Optional), and a host of the port that does not is not
// affected.
func TestClientValidation(t *testing.T) {
	ca, other := testCA(t, "clients"), testCA(t, "other")
	good, err := pki.NewClient(ca, "good", nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := pki.NewClient(other, "bad", nil)
	if err != nil {
		t.Fatal(err)
	}
	serverCert, serverKey := selfSignedPEM(t, "strict.example", "lax.example", "open.example")
	cert := &Certificate{Cert: serverCert, Key: serverKey}
	idx := indexCertificates(t.Context(), &Port{TLS: true, Hosts: []Host{
		{Hostname: "strict.example", Certificate: cert, ClientValidation: &ClientValidation{CACerts: ca.CertPEM}},
		{Hostname: "lax.example", Certificate: cert, ClientValidation: &ClientValidation{CACerts: ca.CertPEM, Optional: true}},
		{Hostname: "open.example", Certificate: cert},
	}})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) { return idx.get(hello.ServerName) }}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	block, _ := pem.Decode(serverCert)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(c)
	for _, tc := range []struct {
		host   string
		client *pki.KeyPair
		ok     bool
	}{
		{"strict.example", good, true},
		{"strict.example", bad, false},
		{"strict.example", nil, false},
		{"lax.example", bad, true},
		{"lax.example", nil, true},
		{"open.example", nil, true},
	} {
		cfg := &tls.Config{ServerName: tc.host, RootCAs: roots}
		who := "none"
		if tc.client != nil {
			who = tc.client.Cert.Subject.CommonName
			pair, err := tls.X509KeyPair(tc.client.CertPEM, tc.client.KeyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := cl.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s with client certificate %s: err %v, want served %t", tc.host, who, err, tc.ok)
		}
	}
}

// selfSignedPEM is a certificate for names that signs itself, and its key.
func selfSignedPEM(t *testing.T, names ...string) ([]byte, []byte) {
	t.Helper()
	kp, err := pki.NewSelfSigned(pki.ServingSpec{CommonName: names[0], DNSNames: names})
	if err != nil {
		t.Fatal(err)
	}
	return kp.CertPEM, kp.KeyPEM
}
