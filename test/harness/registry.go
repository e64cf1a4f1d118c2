package harness

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// Registry is an OCI registry a test serves (go-containerregistry's), over
// TLS with a CA of its own, and with basic auth.
type Registry struct {
	// Host is its host:port.
	Host string
	// CAFile is its CA's certificate, which verifies it.
	CAFile string
	// Username and Password are what it requires.
	Username, Password string

	roots *x509.CertPool
}

// StartRegistry serves a registry on addr:0 until the test ends; each
// request without the credentials gets 401 with a Basic challenge.
func StartRegistry(t testing.TB, addr string) *Registry {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir, "registry-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := pki.NewServing(ca, pki.ServingSpec{CommonName: "registry", IPs: []net.IP{net.ParseIP(addr)}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{Host: l.Addr().String(), CAFile: filepath.Join(dir, "ca.crt"), Username: "puller", Password: "s3cret-registry-password",
		roots: x509.NewCertPool()}
	r.roots.AddCert(ca.Cert)
	handler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if u, p, ok := req.BasicAuth(); !ok || u != r.Username || p != r.Password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			handler.ServeHTTP(w, req)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// Push pushes the image archive at path (as EmbeddedContainerd writes
// them) to ref on the registry.
func (r *Registry) Push(t testing.TB, path, ref string) {
	t.Helper()
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(r.Host + "/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.roots}}
	if err := remote.Write(tag, img, remote.WithTransport(transport),
		remote.WithAuth(&authn.Basic{Username: r.Username, Password: r.Password})); err != nil {
		t.Fatalf("pushing %s: %v", tag, err)
	}
}
