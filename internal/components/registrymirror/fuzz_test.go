package registrymirror

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseRequest: any path and query a node's containerd or a peer
// sends is refused with an error or parsed into a request that names
// exactly what the path did: a registry (ns), a repository, manifests or
// blobs, and a reference without a slash (a digest, for a blob).
func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		"/v2/team/app/manifests/1?ns=registry.example",
		"/v2/team/app/blobs/sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef?ns=docker.io",
		"/v2/library/busybox/manifests/sha256:abc?ns=docker.io",
		"/v2/a/manifests/b/manifests/c?ns=x",
		"/v2/team/app/blobs/latest?ns=docker.io",
		"/v2/team/app/manifests/?ns=docker.io",
		"/v2/team/app/manifests/1",
		"/v2/manifests/1?ns=x",
		"/v3/team/app/manifests/1?ns=x",
		"/v2/team/app/tags/list?ns=x",
		"/v2/%2e%2e/manifests/1?ns=x&ns=y",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		req, err := parseRequest(&http.Request{Method: http.MethodGet, URL: u})
		if err != nil {
			return
		}
		switch {
		case req.registry == "" || req.repository == "" || req.reference == "":
			t.Fatalf("%q parsed into %+v: a part is empty", target, req)
		case req.kind != "manifests" && req.kind != "blobs":
			t.Fatalf("%q parsed into kind %q", target, req.kind)
		case strings.Contains(req.reference, "/"):
			t.Fatalf("%q parsed into reference %q", target, req.reference)
		case req.kind == "blobs" && !strings.Contains(req.reference, ":"):
			t.Fatalf("%q parsed into blob reference %q, not a digest", target, req.reference)
		case "/v2/"+req.repository+"/"+req.kind+"/"+req.reference != u.Path:
			t.Fatalf("%q parsed into %+v, which is not its path", target, req)
		}
		if img := req.image(); !strings.HasPrefix(img, req.registry+"/"+req.repository) {
			t.Fatalf("image %q of %+v", img, req)
		}
	})
}

// FuzzManifest: a manifest a peer sends (the affinity reads what it
// names) and one the node's content holds (its media type is served) are
// read without panic, and the affinity stays bounded whatever they name.
func FuzzManifest(f *testing.F) {
	for _, seed := range []string{
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"digest":"sha256:aa","size":1},"layers":[{"digest":"sha256:bb","size":2}]}`,
		`{"schemaVersion":2,"manifests":[{"digest":"sha256:cc","size":3,"platform":{"os":"linux","architecture":"amd64"}}]}`,
		`{"config":null,"layers":null}`,
		`{"layers":[{"digest":1}]}`,
		`[]`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, manifest []byte) {
		a := newAffinity()
		for range 3 {
			a.addManifest(manifest, "node-a")
		}
		if n := len(a.holders); n > maxAffinity {
			t.Fatalf("%d holders, over %d", n, maxAffinity)
		}
		if mt := manifestMediaType(bytes.NewReader(manifest)); mt == "" {
			t.Fatalf("no media type for %q", manifest)
		}
	})
}
