// Package registrymirror is a node's registry mirror, a read-only OCI
// distribution server beside its embedded containerd, with two jobs:
//
//   - the embedded registry mirror (k3s's --embedded-registry): every node
//     serves the other nodes the images its containerd holds, and is the
//     first endpoint of its own containerd for each registry
//     registries.yaml lists under mirrors. An image pulled or imported once
//     on one node is then pulled by the others from it; when no node has
//     it, the mirror answers 404 and containerd goes on to the next
//     endpoint.
//   - registries.yaml's rewrite, which upstream containerd cannot do: for a
//     registry whose mirrors rename repositories, the mirror renames and
//     pulls from them for its containerd (containerd's own resolver).
//
// One listener, Port on every address, serves over TLS with the
// cluster's certificates: the kubelet's serving certificate, and clients
// must present a node's client certificate signed by the cluster CA. The
// client's identity says the role: the node's own kubelet certificate
// (which its containerd presents) asks the mirror to find the content on
// the other nodes or the rewritten mirrors; another node's asks for this
// node's own content. Peers are found from the Node objects: their
// InternalIP, and the images their kubelets report in status.images,
// asked first.
package registrymirror

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"

	"github.com/kubeboot/kubeboot/internal/platform/registries"
)

// Port is the mirror's port on every node's address.
const Port = 5001

// Certificate pairs of the kubelet, in its --cert-dir: its serving
// certificate is the mirror's, its client certificate the one the mirror
// and the node's containerd present.
const (
	kubeletServing = "kubelet-server"
	kubeletClient  = "kubelet-client"
)

// URL is the mirror's of the node at addr, as its containerd reaches it.
func URL(addr netip.Addr) string {
	return "https://" + netip.AddrPortFrom(addr, Port).String()
}

// Config is one node's mirror.
type Config struct {
	// NodeName is the node's.
	NodeName string
	// Peers says the nodes serve each other images (the embedded
	// registry mirror), of Registries ("*": every one).
	Peers      bool
	Registries []string
	// Rewrites are the registries whose mirrors rename repositories:
	// the mirror pulls from them for the node's containerd.
	Rewrites map[string]*registries.Rewrite
	// CAFile is the cluster CA, which signed the nodes' certificates.
	CAFile string
	// CertDir is the kubelet's --cert-dir.
	CertDir string
	// Store is the node's containerd content.
	Store Store
	// Client lists and watches the Nodes, for the peers.
	Client kubernetes.Interface
}

// Run serves the mirror until ctx is done.
func Run(ctx context.Context, c Config) error {
	var lister corelisters.NodeLister
	if c.Peers {
		factory := informers.NewSharedInformerFactory(c.Client, 0)
		nodes := factory.Core().V1().Nodes()
		lister = nodes.Lister()
		nodes.Informer() // registered before Start
		factory.Start(ctx.Done())
		defer factory.Shutdown()
	}
	// Every address: the peers reach it at the Node's InternalIP, which
	// the kubelet may choose itself.
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(Port))
	if err != nil {
		return fmt.Errorf("the embedded registry mirror: %w", err)
	}
	return serve(ctx, ln, c, lister, URL)
}

// serve serves the mirror on ln until ctx is done; nodes are the Nodes,
// peerURL the URL of a peer's mirror at its InternalIP.
func serve(ctx context.Context, ln net.Listener, c Config, nodes corelisters.NodeLister, peerURL func(netip.Addr) string) error {
	defer ln.Close()
	logger := klog.FromContext(ctx).WithName("registrymirror")
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("%s: no certificate", c.CAFile)
	}
	serving, err := certificate.NewFileStore(kubeletServing, c.CertDir, c.CertDir, "", "")
	if err != nil {
		return err
	}
	client, err := certificate.NewFileStore(kubeletClient, c.CertDir, c.CertDir, "", "")
	if err != nil {
		return err
	}
	m := &mirror{self: c.NodeName, store: c.Store, rewrites: c.Rewrites, logger: logger}
	if c.Peers {
		m.registries = c.Registries
		m.peers = &peers{self: c.NodeName, nodes: nodes, url: peerURL, client: peerClient(pool, client), blobs: newAffinity()}
	}
	srv := &http.Server{
		Handler: m,
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs:  pool,
			// Read at each handshake: the kubelet renews it.
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return serving.Current() },
		},
		ReadHeaderTimeout: 10 * time.Second,
		// A client without a node's certificate is the client's
		// problem, not a line on the node's terminal.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	rewritten := slices.Sorted(maps.Keys(c.Rewrites))
	if c.Peers {
		logger.Info("Serving the embedded registry mirror", "address", ln.Addr().String(), "registries", c.Registries, "rewritten", rewritten)
	} else {
		logger.Info("Serving the registry mirror for rewritten registries", "address", ln.Addr().String(), "rewritten", rewritten)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		return nil
	}
}

// mirror is the handler of every role.
type mirror struct {
	self string
	// registries are those the nodes serve each other, peers how they
	// are asked: nil without the embedded registry mirror.
	registries []string
	peers      *peers
	store      Store
	// rewrites are the registries whose mirrors rename repositories.
	rewrites map[string]*registries.Rewrite
	logger   klog.Logger
}

// request is a registry API request: a manifest or blob of a repository
// of a registry.
type request struct {
	// registry is containerd's ns parameter: the registry mirrored.
	registry, repository string
	// kind is "manifests" or "blobs"; reference a tag or a digest.
	kind, reference string
}

// image is the request's image as containerd names it.
func (r request) image() string {
	sep := ":"
	if strings.Contains(r.reference, ":") {
		sep = "@"
	}
	return r.registry + "/" + r.repository + sep + r.reference
}

func (m *mirror) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "the mirror is read-only")
		return
	}
	node, ok := clientNode(r)
	if !ok || node != m.self && m.peers == nil {
		writeError(w, http.StatusForbidden, "DENIED", "not a node of the cluster")
		return
	}
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		return
	}
	req, err := parseRequest(r)
	if err != nil {
		writeError(w, http.StatusNotFound, "NAME_INVALID", err.Error())
		return
	}
	rewrite := m.rewrites[req.registry]
	if !m.mirrored(req.registry) && rewrite == nil {
		writeError(w, http.StatusNotFound, "NAME_UNKNOWN", fmt.Sprintf("registry %q is not mirrored", req.registry))
		return
	}
	if node != m.self {
		m.serveLocal(w, r, req)
		return
	}
	// The node's containerd: the other nodes first, then the mirrors
	// that rename repositories.
	if m.mirrored(req.registry) && m.peers.serve(w, r, req, m.logger) {
		return
	}
	if rewrite != nil {
		m.serveRewritten(w, r, req, rewrite)
		return
	}
	writeError(w, http.StatusNotFound, unknownCode(req), req.image()+": on no other node")
}

// unknownCode is the registry API's error code for req not found.
func unknownCode(req request) string {
	if req.kind == "blobs" {
		return "BLOB_UNKNOWN"
	}
	return "MANIFEST_UNKNOWN"
}

// clientNode is the node whose certificate the client presented.
func clientNode(r *http.Request) (string, bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", false
	}
	subject := r.TLS.PeerCertificates[0].Subject
	name, ok := nodeidentifier.NewDefaultNodeIdentifier().NodeIdentity(&user.DefaultInfo{Name: subject.CommonName, Groups: subject.Organization})
	return name, ok && name != ""
}

// parseRequest parses /v2/<repository>/(manifests|blobs)/<reference>?ns=<registry>.
func parseRequest(r *http.Request) (request, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	if !ok {
		return request{}, fmt.Errorf("%s: not a registry API path", r.URL.Path)
	}
	for _, kind := range []string{"manifests", "blobs"} {
		i := strings.LastIndex(rest, "/"+kind+"/")
		if i <= 0 {
			continue
		}
		req := request{registry: r.URL.Query().Get("ns"), repository: rest[:i], kind: kind, reference: rest[i+len(kind)+2:]}
		if req.registry == "" {
			return request{}, errors.New("no ns parameter: the mirror serves containerd's mirror requests")
		}
		if req.reference == "" || strings.Contains(req.reference, "/") || kind == "blobs" && !strings.Contains(req.reference, ":") {
			return request{}, fmt.Errorf("%s: not a %s reference", req.reference, kind)
		}
		return req, nil
	}
	return request{}, fmt.Errorf("%s: not a manifest or blob", r.URL.Path)
}

// mirrored reports whether the nodes serve each other registry's images.
func (m *mirror) mirrored(registry string) bool {
	return m.peers != nil && (slices.Contains(m.registries, registry) || slices.Contains(m.registries, "*"))
}

// writeError writes a registry API error.
func writeError(w http.ResponseWriter, status int, code, message string) {
	type apiError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Errors []apiError `json:"errors"`
	}{[]apiError{{code, message}}})
}
