package registrymirror

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
)

// Bounds of a lookup among the peers.
var (
	// askTimeout bounds one peer's answer to whether it has the content.
	askTimeout = 3 * time.Second
	// maxAsking is how many peers are asked at once.
	maxAsking = 8
	// affinityTTL is how long the mirror remembers which peer served the
	// manifest that names a blob, and asks it first for the blob.
	affinityTTL = 10 * time.Minute
	// maxAffinity bounds what it remembers.
	maxAffinity = 10000
)

// forwardedRequestHeaders and forwardedResponseHeaders are the headers
// the mirror passes between its containerd and a peer.
var (
	forwardedRequestHeaders  = []string{"Accept", "Range", "If-Range"}
	forwardedResponseHeaders = []string{"Content-Type", "Content-Length", "Content-Range", "Accept-Ranges", "Docker-Content-Digest"}
)

// peers are the other nodes, as the mirror asks them.
type peers struct {
	self  string
	nodes corelisters.NodeLister
	// url is the URL of the mirror of the node at an InternalIP.
	url    func(netip.Addr) string
	client *http.Client
	blobs  *affinity
}

// peer is one other node's mirror.
type peer struct{ node, url string }

// peerClient is the client of the other nodes' mirrors: it verifies them
// against the cluster CA and presents the kubelet's client certificate.
func peerClient(ca *x509.CertPool, cert certificate.Store) *http.Client {
	dialer := &net.Dialer{Timeout: askTimeout}
	return &http.Client{Transport: &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   askTimeout,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			RootCAs:    ca,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return cert.Current()
			},
		},
	}}
}

// serve answers the node's own containerd from the first peer that has
// what it asks for, and reports whether one had.
func (p *peers) serve(w http.ResponseWriter, r *http.Request, req request, logger klog.Logger) bool {
	first, rest := p.candidates(req)
	from, head := p.find(r, first)
	if from == nil {
		from, head = p.find(r, rest)
	}
	if from == nil {
		return false
	}
	if r.Method == http.MethodHead {
		copyHeaders(w.Header(), head.Header)
		w.WriteHeader(head.StatusCode)
		return true
	}
	resp, err := p.do(r.Context(), r, *from)
	if err != nil {
		logger.V(2).Info("Fetching from a peer failed", "node", from.node, "image", req.image(), "err", err)
		writeError(w, http.StatusBadGateway, "UNKNOWN", "the node that has it did not answer")
		return true
	}
	defer resp.Body.Close()
	logger.V(2).Info("Serving from a peer", "node", from.node, "image", req.image(), "kind", req.kind)
	copyHeaders(w.Header(), resp.Header)
	if req.kind == "manifests" && resp.StatusCode == http.StatusOK {
		// Its blobs are asked of the same peer first.
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestSize+1))
		if err != nil || len(body) > maxManifestSize {
			writeError(w, http.StatusBadGateway, "UNKNOWN", "the peer's manifest could not be read")
			return true
		}
		p.blobs.addManifest(body, from.node)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return true
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return true
}

// candidates are the peers to ask for req: first those known to have it
// (whose kubelet reports the image, or which served a manifest naming
// the blob), then the other Ready nodes.
func (p *peers) candidates(req request) (first, rest []peer) {
	nodes, err := p.nodes.List(labels.Everything())
	if err != nil {
		return nil, nil
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	image, holder := req.image(), p.blobs.get(req.reference)
	for _, n := range nodes {
		if n.Name == p.self || !nodeutil.IsNodeReady(n) {
			continue
		}
		addr, ok := internalIP(n)
		if !ok {
			continue
		}
		pr := peer{node: n.Name, url: p.url(addr)}
		if n.Name == holder || reports(n, image) {
			first = append(first, pr)
		} else {
			rest = append(rest, pr)
		}
	}
	return first, rest
}

// find asks candidates at once, at most maxAsking at a time, whether they
// have what r asks for, and returns the first that has, with its answer
// to HEAD.
func (p *peers) find(r *http.Request, candidates []peer) (*peer, *http.Response) {
	if len(candidates) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	type answer struct {
		peer peer
		resp *http.Response
	}
	found := make(chan answer, len(candidates))
	sem := make(chan struct{}, maxAsking)
	var wg sync.WaitGroup
	for _, c := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			askCtx, cancelAsk := context.WithTimeout(ctx, askTimeout)
			defer cancelAsk()
			head := r.Clone(askCtx)
			head.Method = http.MethodHead
			resp, err := p.do(askCtx, head, c)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent {
				found <- answer{c, resp}
			}
		}()
	}
	go func() { wg.Wait(); close(found) }()
	a, ok := <-found
	if !ok {
		return nil, nil
	}
	return &a.peer, a.resp
}

// do sends r's method, path, query and forwarded headers to the peer.
func (p *peers) do(ctx context.Context, r *http.Request, to peer) (*http.Response, error) {
	out, err := http.NewRequestWithContext(ctx, r.Method, to.url+r.URL.RequestURI(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range forwardedRequestHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			out.Header[h] = v
		}
	}
	return p.client.Do(out)
}

func copyHeaders(dst, src http.Header) {
	for _, h := range forwardedResponseHeaders {
		if v := src.Values(h); len(v) > 0 {
			dst[h] = v
		}
	}
}

// internalIP is the node's first InternalIP.
func internalIP(n *corev1.Node) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if addr, err := netip.ParseAddr(a.Address); err == nil {
			return addr, true
		}
	}
	return netip.Addr{}, false
}

// reports reports whether the node's kubelet lists image (by tag or
// digest) in its status.
func reports(n *corev1.Node, image string) bool {
	for _, img := range n.Status.Images {
		if slices.Contains(img.Names, image) {
			return true
		}
	}
	return false
}

// affinity remembers, for a while, which peer served the manifest that
// names a blob or a child manifest.
type affinity struct {
	mu      sync.Mutex
	holders map[string]holder
}

type holder struct {
	node    string
	expires time.Time
}

func newAffinity() *affinity { return &affinity{holders: map[string]holder{}} }

// addManifest remembers node as the holder of what the manifest (an image
// manifest or an index) names.
func (a *affinity) addManifest(manifest []byte, node string) {
	var m struct {
		Config    *ocispec.Descriptor  `json:"config"`
		Layers    []ocispec.Descriptor `json:"layers"`
		Manifests []ocispec.Descriptor `json:"manifests"`
	}
	if err := json.NewDecoder(bytes.NewReader(manifest)).Decode(&m); err != nil {
		return
	}
	named := append(m.Layers, m.Manifests...)
	if m.Config != nil {
		named = append(named, *m.Config)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if len(a.holders)+len(named) > maxAffinity {
		for d, h := range a.holders {
			if now.After(h.expires) {
				delete(a.holders, d)
			}
		}
		if len(a.holders)+len(named) > maxAffinity {
			a.holders = map[string]holder{}
		}
	}
	for _, d := range named {
		a.holders[d.Digest.String()] = holder{node: node, expires: now.Add(affinityTTL)}
	}
}

// get is the node remembered for dgst, or "".
func (a *affinity) get(dgst string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.holders[dgst]
	if !ok || time.Now().After(h.expires) {
		return ""
	}
	return h.node
}
