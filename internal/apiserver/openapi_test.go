package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func doc() *spec3.OpenAPI {
	return &spec3.OpenAPI{
		Version: "3.0.0",
		Info:    &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "v1.37.2"}},
		Paths:   &spec3.Paths{Paths: map[string]*spec3.Path{}},
	}
}

// TestLazyV3: the v3 discovery is answered without building a document;
// documents are served as kube-openapi's handler3 serves them.
func TestLazyV3(t *testing.T) {
	builds := 0
	all := cached.Once(cached.Func(func() (map[string]*spec3.OpenAPI, string, error) {
		builds++
		return map[string]*spec3.OpenAPI{
			"api/v1":       doc(),
			"apis/apps/v1": doc(),
		}, "e", nil
	}))
	m := mux.NewPathRecorderMux("test")
	newLazyV3([]string{"api/v1", "apis/apps/v1"}, "e", all).register(m)
	get := func(path, accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		m.ServeHTTP(w, r)
		return w
	}

	w := get("/openapi/v3", "")
	var d handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatalf("discovery: %v: %s", err, w.Body)
	}
	if got := d.Paths["apis/apps/v1"].ServerRelativeURL; got != "/openapi/v3/apis/apps/v1?hash=e" {
		t.Errorf("apps/v1 serverRelativeURL = %q", got)
	}
	if len(d.Paths) != 2 {
		t.Errorf("discovery paths = %v, want 2", d.Paths)
	}
	if builds != 0 {
		t.Errorf("the discovery built the documents (%d builds); it must not", builds)
	}

	tests := []struct {
		name, path, accept string
		wantCode           int
		wantType           string
		wantCache          bool
	}{
		{"json by hash", "/openapi/v3/apis/apps/v1?hash=e", "application/json", http.StatusOK, "application/json", true},
		{"json without hash", "/openapi/v3/api/v1", "", http.StatusOK, "application/json", false},
		{"protobuf", "/openapi/v3/api/v1?hash=e", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf", http.StatusOK, "application/com.github.proto-openapi.spec.v3.v1.0+protobuf", true},
		{"protobuf, older name", "/openapi/v3/api/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", http.StatusOK, "application/com.github.proto-openapi.spec.v3.v1.0+protobuf", false},
		{"stale hash", "/openapi/v3/api/v1?hash=old", "application/json", http.StatusMovedPermanently, "", false},
		{"unknown group version", "/openapi/v3/apis/nope/v1", "application/json", http.StatusNotFound, "", false},
		{"unacceptable type", "/openapi/v3/api/v1", "text/html", http.StatusNotAcceptable, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := get(tt.path, tt.accept)
			if w.Code != tt.wantCode {
				t.Fatalf("code = %d, want %d: %s", w.Code, tt.wantCode, w.Body)
			}
			if tt.wantCode == http.StatusMovedPermanently {
				if loc := w.Header().Get("Location"); loc != "/openapi/v3/api/v1?hash=e" {
					t.Errorf("Location = %q", loc)
				}
				return
			}
			if tt.wantCode != http.StatusOK {
				return
			}
			if got := w.Header().Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			if got := w.Header().Get("Cache-Control") == "public, immutable"; got != tt.wantCache {
				t.Errorf("immutable caching = %v, want %v", got, tt.wantCache)
			}
			if tt.wantType == "application/json" {
				var doc spec3.OpenAPI
				if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.Info.Title != "Kubernetes" {
					t.Errorf("document %s: %v", w.Body, err)
				}
			}
		})
	}
	if builds != 1 {
		t.Errorf("documents built %d times, want once", builds)
	}
}
