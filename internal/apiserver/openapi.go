package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	restful "github.com/emicklei/go-restful/v3"

	"github.com/google/uuid"
	"github.com/munnerz/goautoneg"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// installOpenAPI serves /openapi/v2 and /openapi/v3 as the generic server
// does, except that the documents are built on their first request
// instead of at start. The v2 document is then built only when a client
// asks for it (kubectl's explain, validation): most servers start far more
// often than anyone reads it, and it costs tens of milliseconds and
// several MB of heap. The v3 documents are built on the first request of
// any of them, all in one pass, on one set of definitions; the v3
// discovery the aggregator reads while it starts needs none of them
// (lazyV3). Server-side apply does not need these documents; it builds its own type
// information at install.
func installOpenAPI(s *genericapiserver.GenericAPIServer, v2 *common.Config, v3 *common.OpenAPIV3Config) error {
	services := s.Handler.GoRestfulContainer.RegisteredWebServices()
	etag := uuid.NewString() // the served APIs never change in a process

	v2Spec := cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		sw, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(services), v2)
		if err != nil {
			return nil, "", err
		}
		sw.Definitions = handler.PruneDefaults(sw.Definitions)
		return sw, etag, nil
	}))
	handler.NewOpenAPIServiceLazy(v2Spec).RegisterOpenAPIVersionedService("/openapi/v2", s.Handler.NonGoRestfulMux)

	all := cached.Once(cached.Func(func() (map[string]*spec3.OpenAPI, string, error) {
		docs, err := buildV3(services, v3)
		return docs, etag, err
	}))
	groups := make([]string, 0, len(services))
	for _, ws := range services {
		groups = append(groups, strings.TrimPrefix(ws.RootPath(), "/"))
	}
	newLazyV3(groups, etag, all).register(s.Handler.NonGoRestfulMux)
	return nil
}

// lazyV3 serves /openapi/v3 and /openapi/v3/<group-version> as
// kube-openapi's handler3 does (the same discovery document, content
// negotiation, hash redirects and caching headers), with one difference:
// the hash in each serverRelativeURL is the process's etag rather than a
// SHA-512 of the document. handler3 must build and marshal every document
// to answer the discovery, which the aggregator reads while it starts;
// here nothing is built until a document is asked for. The documents of
// the built-in groups never change within a process, so a per-process
// hash is as cache-safe as a content hash, at the price of a refetch
// after a restart.
type lazyV3 struct {
	etag      string
	discovery []byte
	all       cached.Value[map[string]*spec3.OpenAPI]

	// mu guards the encoded documents, by group version.
	mu        sync.Mutex
	jsonDocs  map[string][]byte
	protoDocs map[string][]byte
}

const (
	v3JSON            = "application/json"
	v3Protobuf        = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	v3ProtobufOldName = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

func newLazyV3(groups []string, etag string, all cached.Value[map[string]*spec3.OpenAPI]) *lazyV3 {
	d := handler3.OpenAPIV3Discovery{Paths: map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}}
	for _, gv := range groups {
		d.Paths[gv] = handler3.OpenAPIV3DiscoveryGroupVersion{ServerRelativeURL: v3URL(gv, etag)}
	}
	discovery, _ := json.Marshal(d) // maps of strings always marshal
	return &lazyV3{etag: etag, discovery: discovery, all: all, jsonDocs: map[string][]byte{}, protoDocs: map[string][]byte{}}
}

func v3URL(gv, etag string) string {
	return (&url.URL{Path: path.Join("/openapi/v3", gv), RawQuery: url.Values{"hash": {etag}}.Encode()}).String()
}

func (l *lazyV3) register(mux common.PathHandlerByGroupVersion) {
	start := time.Now()
	mux.Handle("/openapi/v3", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Etag", strconv.Quote(l.etag))
		w.Header().Set("Content-Type", "application/json")
		http.ServeContent(w, r, "/openapi/v3", start, bytes.NewReader(l.discovery))
	}))
	mux.HandlePrefix("/openapi/v3/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.serveGroupVersion(w, r, start)
	}))
}

func (l *lazyV3) serveGroupVersion(w http.ResponseWriter, r *http.Request, modified time.Time) {
	gv := strings.TrimPrefix(r.URL.Path, "/openapi/v3/")
	w.Header().Add("Vary", "Accept")
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	contentType := goautoneg.Negotiate(accept, []string{v3JSON, v3Protobuf, v3ProtobufOldName})
	if contentType == "" {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	data, err := l.document(gv, contentType != v3JSON)
	if err != nil {
		klog.FromContext(r.Context()).Error(err, "Serving OpenAPI v3", "groupVersion", gv)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if data == nil {
		http.NotFound(w, r)
		return
	}
	if contentType == v3ProtobufOldName {
		contentType = v3Protobuf
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Etag", strconv.Quote(l.etag))
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != l.etag {
			http.Redirect(w, r, v3URL(gv, l.etag), http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
	}
	http.ServeContent(w, r, "", modified, bytes.NewReader(data))
}

// document returns the group version's document as JSON or protobuf,
// built and encoded on first use; nil if there is no such group version.
func (l *lazyV3) document(gv string, protobuf bool) ([]byte, error) {
	docs, _, err := l.all.Get()
	if err != nil {
		return nil, err
	}
	doc, ok := docs[gv]
	if !ok {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	j, ok := l.jsonDocs[gv]
	if !ok {
		if j, err = json.Marshal(doc); err != nil {
			return nil, fmt.Errorf("encoding the OpenAPI v3 document of %s: %w", gv, err)
		}
		l.jsonDocs[gv] = j
	}
	if !protobuf {
		return j, nil
	}
	p, ok := l.protoDocs[gv]
	if !ok {
		if p, err = handler3.ToV3ProtoBinary(j); err != nil {
			return nil, fmt.Errorf("encoding the OpenAPI v3 document of %s: %w", gv, err)
		}
		l.protoDocs[gv] = p
	}
	return p, nil
}

// buildV3 builds the v3 document of every group version, one after
// another. builder3 deletes extensions from the config's definitions,
// which the documents point into, so no document may be handed out (and
// marshalled) while another is being built.
//
// The shared config's definitions are gone by then (Server.Run drops them):
// the documents are built on a copy of the config with its own, built
// once for all of them.
func buildV3(services []*restful.WebService, shared *common.OpenAPIV3Config) (map[string]*spec3.OpenAPI, error) {
	config := *shared
	config.Definitions = config.GetDefinitions(func(name string) spec.Ref {
		defName, _ := config.GetDefinitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
	})
	docs := make(map[string]*spec3.OpenAPI, len(services))
	for _, ws := range services {
		doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), &config)
		if err != nil {
			return nil, err
		}
		gv := strings.TrimPrefix(ws.RootPath(), "/")
		scopeSharedKinds(doc, gv)
		docs[gv] = doc
	}
	return docs, nil
}

// gvkExtension is the OpenAPI extension listing a schema's kinds.
const gvkExtension = "x-kubernetes-group-version-kind"

// scopeSharedKinds narrows, in the document of group version gv ("api/v1",
// "apis/<group>/<version>"), the kinds of DeleteOptions and WatchEvent,
// which every group registers, to gv's and core/v1's, as kube-apiserver's
// per-group documents do (k8s.io/apiserver's routes.OpenAPI.InstallV3);
// unscoped, each document lists ~60 of them. The extension map is replaced,
// not written: the schema may share it with the definitions every server
// of the chain builds from.
func scopeSharedKinds(doc *spec3.OpenAPI, gv string) {
	group, version, ok := splitGroupVersionPath(gv)
	if !ok || doc.Components == nil {
		return
	}
	for _, schema := range doc.Components.Schemas {
		if schema == nil {
			continue
		}
		gvks, _ := schema.Extensions[gvkExtension].([]interface{})
		if len(gvks) <= 1 || !isSharedKind(gvks[0]) {
			continue
		}
		var scoped []interface{}
		for _, item := range gvks {
			m, _ := item.(map[string]interface{})
			g, _ := m["group"].(string)
			v, _ := m["version"].(string)
			if (g == group && v == version) || (g == "" && v == "v1") {
				scoped = append(scoped, item)
			}
		}
		ext := maps.Clone(schema.Extensions)
		if len(scoped) > 0 {
			ext[gvkExtension] = scoped
		} else {
			delete(ext, gvkExtension)
		}
		schema.Extensions = ext
	}
}

// isSharedKind reports whether a kinds entry is of DeleteOptions or
// WatchEvent, which metav1.AddToGroupVersion registers in every group.
func isSharedKind(entry interface{}) bool {
	m, _ := entry.(map[string]interface{})
	kind, _ := m["kind"].(string)
	return kind == "DeleteOptions" || kind == "WatchEvent"
}

// splitGroupVersionPath splits "api/v1" and "apis/<group>/<version>".
func splitGroupVersionPath(gv string) (group, version string, ok bool) {
	parts := strings.Split(gv, "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		return "", parts[1], true
	case len(parts) == 3 && parts[0] == "apis":
		return parts[1], parts[2], true
	}
	return "", "", false
}
