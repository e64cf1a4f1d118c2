package registrymirror

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/registries"
)

// memStore is a Store in memory.
type memStore struct {
	images  map[string]ocispec.Descriptor
	content map[digest.Digest][]byte
}

func (s *memStore) Resolve(_ context.Context, name string) (ocispec.Descriptor, error) {
	d, ok := s.images[name]
	if !ok {
		return ocispec.Descriptor{}, errdefs.ErrNotFound
	}
	return d, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func (s *memStore) Open(_ context.Context, dgst digest.Digest) (Content, int64, error) {
	b, ok := s.content[dgst]
	if !ok {
		return nil, 0, errdefs.ErrNotFound
	}
	return nopCloser{bytes.NewReader(b)}, int64(len(b)), nil
}

// testImage is an image: an index naming a manifest naming a config and
// a layer.
type testImage struct {
	name                            string
	index, manifest, config, layer  []byte
	indexD, manifestD, configD, lay digest.Digest
}

func newTestImage(t *testing.T, name, layer string) testImage {
	t.Helper()
	im := testImage{name: name, layer: []byte(layer), config: []byte(`{"architecture":"amd64","os":"linux"}`)}
	im.lay, im.configD = digest.FromBytes(im.layer), digest.FromBytes(im.config)
	marshal := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// No mediaType field: the store keeps none, the mirror tells it by
	// the fields.
	im.manifest = marshal(map[string]any{"schemaVersion": 2,
		"config": ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: im.configD, Size: int64(len(im.config))},
		"layers": []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: im.lay, Size: int64(len(im.layer))}}})
	im.manifestD = digest.FromBytes(im.manifest)
	im.index = marshal(ocispec.Index{MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: im.manifestD, Size: int64(len(im.manifest))}}})
	im.indexD = digest.FromBytes(im.index)
	return im
}

func (s *memStore) add(im testImage) {
	s.images[im.name] = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: im.indexD, Size: int64(len(im.index))}
	for d, b := range map[digest.Digest][]byte{im.indexD: im.index, im.manifestD: im.manifest, im.configD: im.config, im.lay: im.layer} {
		s.content[d] = b
	}
}

// testNode is a node's mirror, serving on its own loopback address.
type testNode struct {
	name    string
	addr    netip.Addr
	url     string
	store   *memStore
	certDir string
}

// testCluster is nodes whose mirrors serve each other, with a CA.
type testCluster struct {
	ca     *pki.KeyPair
	caFile string
	nodes  map[string]*testNode
	lister corelisters.NodeLister
	index  cache.Indexer
}

func newTestCluster(t *testing.T, configure func(*Config), names ...string) *testCluster {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{ca: ca, caFile: filepath.Join(dir, "ca.crt"), nodes: map[string]*testNode{},
		index: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	c.lister = corelisters.NewNodeLister(c.index)
	for i, name := range names {
		n := &testNode{name: name, addr: netip.AddrFrom4([4]byte{127, 0, 0, byte(11 + i)}),
			store: &memStore{images: map[string]ocispec.Descriptor{}, content: map[digest.Digest][]byte{}}}
		n.certDir = t.TempDir()
		serving, err := pki.NewServing(ca, pki.ServingSpec{CommonName: "system:node:" + name, IPs: []net.IP{n.addr.AsSlice()}})
		if err != nil {
			t.Fatal(err)
		}
		client, err := pki.NewClient(ca, "system:node:"+name, []string{"system:nodes"})
		if err != nil {
			t.Fatal(err)
		}
		writePair(t, filepath.Join(n.certDir, kubeletServing+"-current.pem"), serving)
		writePair(t, filepath.Join(n.certDir, kubeletClient+"-current.pem"), client)
		c.nodes[name] = n
		c.setNode(t, name, true, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	urls := map[netip.Addr]string{}
	for _, n := range c.nodes {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(n.addr, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		n.url = "https://" + ln.Addr().String()
		urls[n.addr] = n.url
		cfg := Config{NodeName: n.name, Peers: true, Registries: []string{"registry.test", "docker.io"}, CAFile: c.caFile, CertDir: n.certDir, Store: n.store}
		if configure != nil {
			configure(&cfg)
		}
		done := make(chan error, 1)
		go func() { done <- serve(ctx, ln, cfg, c.lister, func(a netip.Addr) string { return urls[a] }) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("node %s: %v", cfg.NodeName, err)
			}
		})
	}
	return c
}

func writePair(t *testing.T, path string, kp *pki.KeyPair) {
	t.Helper()
	if err := os.WriteFile(path, append(slices.Clone(kp.CertPEM), kp.KeyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// setNode puts the Node name into the lister: Ready or not, reporting
// images.
func (c *testCluster) setNode(t *testing.T, name string, ready bool, images []string) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: c.nodes[name].addr.String()}},
		Images:     []corev1.ContainerImage{{Names: images}},
	}}
	if err := c.index.Update(node); err != nil {
		t.Fatal(err)
	}
}

// client is an HTTP client presenting a certificate for user in groups,
// signed by ca.
func (c *testCluster) client(t *testing.T, ca *pki.KeyPair, user string, groups ...string) *http.Client {
	t.Helper()
	kp, err := pki.NewClient(ca, user, groups)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
}

type answer struct {
	status       int
	body         string
	contentType  string
	digestHeader string
	length       string
}

func do(t *testing.T, client *http.Client, method, url string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, body: string(body), contentType: resp.Header.Get("Content-Type"),
		digestHeader: resp.Header.Get("Docker-Content-Digest"), length: resp.Header.Get("Content-Length")}
}

func TestMirror(t *testing.T) {
	c := newTestCluster(t, nil, "a", "b", "c")
	onA := newTestImage(t, "registry.test/team/app:1", "layer on a")
	onC := newTestImage(t, "registry.test/team/tool:2", "layer on c")
	c.nodes["a"].store.add(onA)
	c.nodes["c"].store.add(onC)
	notMirrored := newTestImage(t, "elsewhere.test/app:1", "not mirrored")
	c.nodes["c"].store.add(notMirrored)

	a := c.nodes["a"].url
	// b asks a for a's own content; a's containerd (its kubelet's
	// certificate) asks a to find content on the others.
	asPeerB := c.client(t, c.ca, "system:node:b", "system:nodes")
	asOwnA := c.client(t, c.ca, "system:node:a", "system:nodes")
	otherCA, err := pki.EnsureCA(t.TempDir(), "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	const ns = "?ns=registry.test"
	for _, tc := range []struct {
		name, method, path string
		client             *http.Client
		header             http.Header
		want               answer
	}{
		{name: "a peer gets a manifest by tag from the node's content", method: "GET", path: "/v2/team/app/manifests/1" + ns, client: asPeerB,
			want: answer{status: 200, body: string(onA.index), contentType: ocispec.MediaTypeImageIndex, digestHeader: onA.indexD.String()}},
		{name: "a manifest by digest, its media type told by its fields", method: "GET", path: "/v2/team/app/manifests/" + onA.manifestD.String() + ns, client: asPeerB,
			want: answer{status: 200, body: string(onA.manifest), contentType: ocispec.MediaTypeImageManifest, digestHeader: onA.manifestD.String()}},
		{name: "HEAD of a blob: its length, no body", method: "HEAD", path: "/v2/team/app/blobs/" + onA.lay.String() + ns, client: asPeerB,
			want: answer{status: 200, contentType: "application/octet-stream", digestHeader: onA.lay.String(), length: "10"}},
		{name: "a range of a blob", method: "GET", path: "/v2/team/app/blobs/" + onA.lay.String() + ns, client: asPeerB, header: http.Header{"Range": {"bytes=0-4"}},
			want: answer{status: 206, body: "layer", contentType: "application/octet-stream", digestHeader: onA.lay.String(), length: "5"}},
		{name: "a peer asking for what the node lacks gets 404, not the others' content", method: "GET", path: "/v2/team/tool/manifests/2" + ns, client: asPeerB,
			want: answer{status: 404, contentType: "application/json"}},
		{name: "the node's containerd gets another node's manifest", method: "GET", path: "/v2/team/tool/manifests/2" + ns, client: asOwnA,
			want: answer{status: 200, body: string(onC.index), contentType: ocispec.MediaTypeImageIndex, digestHeader: onC.indexD.String()}},
		{name: "and its blob, HEAD first", method: "HEAD", path: "/v2/team/tool/blobs/" + onC.lay.String() + ns, client: asOwnA,
			want: answer{status: 200, contentType: "application/octet-stream", digestHeader: onC.lay.String(), length: "10"}},
		{name: "and its blob", method: "GET", path: "/v2/team/tool/blobs/" + onC.lay.String() + ns, client: asOwnA,
			want: answer{status: 200, body: "layer on c", contentType: "application/octet-stream", digestHeader: onC.lay.String(), length: "10"}},
		{name: "on no node: 404, containerd goes on to the registry", method: "GET", path: "/v2/team/none/manifests/1" + ns, client: asOwnA,
			want: answer{status: 404, contentType: "application/json"}},
		{name: "a registry not mirrored", method: "GET", path: "/v2/app/manifests/1?ns=elsewhere.test", client: asOwnA,
			want: answer{status: 404, contentType: "application/json"}},
		{name: "no ns parameter", method: "GET", path: "/v2/team/app/manifests/1", client: asPeerB,
			want: answer{status: 404, contentType: "application/json"}},
		{name: "a blob by tag", method: "GET", path: "/v2/team/app/blobs/1" + ns, client: asPeerB,
			want: answer{status: 404, contentType: "application/json"}},
		{name: "a bad digest", method: "GET", path: "/v2/team/app/blobs/sha256:zz" + ns, client: asPeerB,
			want: answer{status: 400, contentType: "application/json"}},
		{name: "read-only", method: "PUT", path: "/v2/team/app/manifests/1" + ns, client: asPeerB,
			want: answer{status: 405, contentType: "application/json"}},
		{name: "a client of the cluster that is not a node", method: "GET", path: "/v2/team/app/manifests/1" + ns, client: c.client(t, c.ca, "admin", "system:masters"),
			want: answer{status: 403, contentType: "application/json"}},
		{name: "the API version check", method: "GET", path: "/v2/", client: asPeerB, want: answer{status: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := do(t, tc.client, tc.method, a+tc.path, tc.header)
			if tc.want.status == 404 || tc.want.status >= 400 {
				// The body is the registry API's error; its code is
				// checked, not its words.
				if !strings.Contains(got.body, `"errors":[{"code":`) {
					t.Errorf("body %q: not a registry API error", got.body)
				}
				got.body = ""
			}
			if tc.want.length == "" {
				got.length = ""
			}
			if tc.want.status == 200 && tc.want.contentType == "" {
				got.contentType = ""
			}
			if got != tc.want {
				t.Errorf("%s %s\n got %+v\nwant %+v", tc.method, tc.path, got, tc.want)
			}
		})
	}

	t.Run("a certificate of another CA is refused in the handshake", func(t *testing.T) {
		client := c.client(t, otherCA, "system:node:b", "system:nodes")
		resp, err := client.Get(a + "/v2/")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("answered %s", resp.Status)
		}
	})

	t.Run("a node not Ready is not asked", func(t *testing.T) {
		c.setNode(t, "c", false, nil)
		defer c.setNode(t, "c", true, nil)
		if got := do(t, asOwnA, "GET", a+"/v2/team/tool/manifests/2"+ns, nil); got.status != 404 {
			t.Errorf("got %d, want 404", got.status)
		}
	})
}

// TestCandidates: the peers that report the image, or served the manifest
// naming a blob, are asked first; the node itself, Nodes not Ready and
// Nodes without an InternalIP never.
func TestCandidates(t *testing.T) {
	c := &testCluster{nodes: map[string]*testNode{}, index: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	c.lister = corelisters.NewNodeLister(c.index)
	for i, name := range []string{"self", "n1", "n2", "n3", "down"} {
		c.nodes[name] = &testNode{name: name, addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i)})}
	}
	for _, name := range []string{"self", "n1", "n2", "n3"} {
		c.setNode(t, name, true, nil)
	}
	c.setNode(t, "down", false, []string{"registry.test/app:1"})
	c.setNode(t, "n3", true, []string{"registry.test/app:1", "registry.test/app@sha256:" + strings.Repeat("a", 64)})
	if err := c.index.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-ip"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}); err != nil {
		t.Fatal(err)
	}
	p := &peers{self: "self", nodes: c.lister, url: URL, blobs: newAffinity()}
	blob := "sha256:" + strings.Repeat("b", 64)
	p.blobs.addManifest([]byte(`{"layers":[{"digest":"`+blob+`"}]}`), "n2")

	names := func(ps []peer) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.node+"="+p.url)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name        string
		req         request
		first, rest string
	}{
		{"a tag a node reports", request{registry: "registry.test", repository: "app", kind: "manifests", reference: "1"},
			"n3=https://198.51.100.4:5001", "n1=https://198.51.100.2:5001,n2=https://198.51.100.3:5001"},
		{"a digest a node reports", request{registry: "registry.test", repository: "app", kind: "manifests", reference: "sha256:" + strings.Repeat("a", 64)},
			"n3=https://198.51.100.4:5001", "n1=https://198.51.100.2:5001,n2=https://198.51.100.3:5001"},
		{"a blob of a manifest a node served", request{registry: "registry.test", repository: "app", kind: "blobs", reference: blob},
			"n2=https://198.51.100.3:5001", "n1=https://198.51.100.2:5001,n3=https://198.51.100.4:5001"},
		{"unknown", request{registry: "registry.test", repository: "other", kind: "manifests", reference: "1"},
			"", "n1=https://198.51.100.2:5001,n2=https://198.51.100.3:5001,n3=https://198.51.100.4:5001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, rest := p.candidates(tc.req)
			if names(first) != tc.first || names(rest) != tc.rest {
				t.Errorf("got first %q rest %q\nwant first %q rest %q", names(first), names(rest), tc.first, tc.rest)
			}
		})
	}
}

// TestRewrite: for a registry whose mirrors rename repositories, the
// node's containerd gets the renamed repository's content from the
// mirror (a registry that requires basic auth here), by the original
// name, or 404 when the mirror has neither; without the embedded registry
// mirror, other nodes are refused.
func TestRewrite(t *testing.T) {
	const user, password = "puller", "s3cret"
	upstream := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		upstream.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/mirrored/team/app:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: user, Password: password})); err != nil {
		t.Fatal(err)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	layer, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	layerData, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	manifestDigest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r := &registries.Config{
		Mirrors: map[string]registries.Mirror{"registry.test": {Endpoints: []string{srv.URL}, Rewrites: map[string]string{"^team/(.*)$": "mirrored/team/$1"}}},
		Configs: map[string]registries.HostConfig{host: {Auth: &registries.Auth{Username: user, Password: password}}},
	}
	rewrites, err := r.Rewrites()
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, func(cfg *Config) { cfg.Peers, cfg.Registries, cfg.Rewrites = false, nil, rewrites }, "a", "b")
	a := c.nodes["a"].url
	own := c.client(t, c.ca, "system:node:a", "system:nodes")
	const ns = "?ns=registry.test"
	for _, tc := range []struct {
		name, method, path string
		client             *http.Client
		want               int
		body               string
	}{
		{"a manifest by the original name", "GET", "/v2/team/app/manifests/1" + ns, own, 200, string(manifest)},
		{"HEAD", "HEAD", "/v2/team/app/manifests/1" + ns, own, 200, ""},
		{"a manifest by digest", "GET", "/v2/team/app/manifests/" + manifestDigest.String() + ns, own, 200, string(manifest)},
		{"a blob's HEAD", "HEAD", "/v2/team/app/blobs/" + layer.String() + ns, own, 200, ""},
		{"a blob", "GET", "/v2/team/app/blobs/" + layer.String() + ns, own, 200, string(layerData)},
		{"a repository the mirror lacks", "GET", "/v2/team/other/manifests/1" + ns, own, 404, ""},
		{"a registry without rewrites", "GET", "/v2/team/app/manifests/1?ns=elsewhere.test", own, 404, ""},
		{"another node, without the embedded registry mirror", "GET", "/v2/team/app/manifests/1" + ns, c.client(t, c.ca, "system:node:b", "system:nodes"), 403, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := do(t, tc.client, tc.method, a+tc.path, nil)
			if got.status != tc.want || tc.body != "" && got.body != tc.body {
				t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, got.status, got.body, tc.want, tc.body)
			}
		})
	}
}

// TestRewritePull pulls through the mirror as containerd does, with
// containerd's own resolver and fetcher: the index or manifest by tag,
// then every manifest and blob it names, by digest.
func TestRewritePull(t *testing.T) {
	upstream := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewTLSServer(upstream)
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host + "/renamed/app:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	r := &registries.Config{
		Mirrors: map[string]registries.Mirror{"rewrite.test": {Endpoints: []string{srv.URL}, Rewrites: map[string]string{"^kubeboot/(.*)$": "renamed/$1"}}},
		Configs: map[string]registries.HostConfig{host: {TLS: &registries.TLS{CAFile: caFile}}},
	}
	rewrites, err := r.Rewrites()
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, func(cfg *Config) { cfg.Peers, cfg.Registries, cfg.Rewrites = false, nil, rewrites }, "a")
	a := c.nodes["a"]
	client := c.client(t, c.ca, "system:node:a", "system:nodes")
	hostName := strings.TrimPrefix(a.url, "https://")
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: func(string) ([]docker.RegistryHost, error) {
		return []docker.RegistryHost{{Client: client, Host: hostName, Scheme: "https", Path: "/v2",
			Capabilities: docker.HostCapabilityPull | docker.HostCapabilityResolve}}, nil
	}})
	ctx := context.Background()
	refName, desc, err := resolver.Resolve(ctx, "rewrite.test/kubeboot/app:1")
	if err != nil {
		t.Fatal(err)
	}
	fetcher, err := resolver.Fetcher(ctx, refName)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(d ocispec.Descriptor) []byte {
		rc, err := fetcher.Fetch(ctx, d)
		if err != nil {
			t.Fatalf("fetching %s %s: %v", d.MediaType, d.Digest, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		if digest.FromBytes(b) != d.Digest {
			t.Errorf("%s: got content of %s", d.Digest, digest.FromBytes(b))
		}
		return b
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(fetch(desc), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 2 {
		t.Fatalf("manifest %+v: want 2 layers", m)
	}
	for _, d := range append(m.Layers, m.Config) {
		fetch(d)
	}
}
