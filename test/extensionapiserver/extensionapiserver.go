// Package extensionapiserver is a small extension API server for tests of
// the aggregation layer: an HTTPS server for one API group with one
// read-only namespaced resource, flunders.wardle.kubeboot.test/v1alpha1.
//
// It serves what the aggregator needs from a backend: legacy discovery
// (/apis, /apis/<group>, /apis/<group>/<version>; the aggregator falls back
// to it when a backend does not speak aggregated discovery), list and get
// of flunders as JSON or as a meta.k8s.io/v1 Table (what kubectl asks
// for), and metav1.Status errors. It authenticates callers the way a real
// extension apiserver does with the front-proxy contract of the
// extension-apiserver-authentication ConfigMap: a client certificate
// signed by the request header CA, with a common name among the allowed
// names, and then the user from the X-Remote-User and X-Remote-Group
// headers. Every request is recorded for the test to inspect.
package extensionapiserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
)

// The API the server serves.
const (
	Group    = "wardle.kubeboot.test"
	Version  = "v1alpha1"
	Resource = "flunders"
	Kind     = "Flunder"
)

// GroupVersion is Group/Version.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// GroupVersionResource is the flunders resource.
var GroupVersionResource = GroupVersion.WithResource(Resource)

// Flunder is the served kind.
type Flunder struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              FlunderSpec `json:"spec"`
}

// FlunderSpec is a Flunder's spec.
type FlunderSpec struct {
	Color string `json:"color"`
}

// FlunderList is a list of flunders.
type FlunderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Flunder `json:"items"`
}

// Options configures a Server.
type Options struct {
	// Address is the host:port to listen on, e.g. "198.51.100.50:0".
	Address string
	// RequestHeaderCA verifies the client certificate of the front proxy
	// (the aggregator); requests without a verified certificate get 401.
	// Nil: any caller is accepted and only recorded.
	RequestHeaderCA *x509.CertPool
	// AllowedNames are the common names the front proxy's certificate may
	// carry; empty: any.
	AllowedNames []string
	// Flunders are the objects served (namespace and name required).
	Flunders []Flunder
}

// Request is one request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	// PeerCertificates is the certificate chain the client presented.
	PeerCertificates []*x509.Certificate
	// User and Groups are the identity taken from the request headers,
	// set only when the client certificate was accepted.
	User   string
	Groups []string
	// Status is the HTTP status the server answered.
	Status int
}

// Server is a running extension apiserver.
type Server struct {
	// URL is the https URL of the server.
	URL string
	// Port is the port it listens on.
	Port int32

	opts    Options
	created time.Time
	http    *httptest.Server

	mu       sync.Mutex
	requests []Request
}

// Start starts a server; Close stops it.
func Start(opts Options) (*Server, error) {
	l, err := net.Listen("tcp", opts.Address)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, created: time.Now().Add(-time.Hour)}
	s.http = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.http.Listener = l
	// Ask for a client certificate, verify it in the handler (so that a
	// refused one shows up as a 401 with a reason rather than a failed
	// handshake).
	s.http.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	s.http.StartTLS()
	s.URL = s.http.URL
	s.Port = int32(l.Addr().(*net.TCPAddr).Port)
	return s, nil
}

// Close stops the server: the listener is closed (new connections are
// refused) and open connections are closed.
func (s *Server) Close() {
	s.http.CloseClientConnections()
	s.http.Close()
}

// Requests returns a copy of the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) record(r *http.Request, status int, user string, groups []string) {
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), User: user, Groups: groups, Status: status}
	if r.TLS != nil {
		req.PeerCertificates = r.TLS.PeerCertificates
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
}

// authenticate checks the front proxy's client certificate and returns
// the user the headers name.
func (s *Server) authenticate(r *http.Request) (string, []string, error) {
	if s.opts.RequestHeaderCA != nil {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return "", nil, fmt.Errorf("no client certificate")
		}
		leaf := r.TLS.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{
			Roots:         s.opts.RequestHeaderCA,
			Intermediates: inter,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return "", nil, fmt.Errorf("client certificate %q: %v", leaf.Subject.CommonName, err)
		}
		if len(s.opts.AllowedNames) > 0 && !slices.Contains(s.opts.AllowedNames, leaf.Subject.CommonName) {
			return "", nil, fmt.Errorf("client certificate common name %q is not among %v", leaf.Subject.CommonName, s.opts.AllowedNames)
		}
	}
	user := r.Header.Get("X-Remote-User")
	if user == "" {
		return "", nil, fmt.Errorf("no X-Remote-User header")
	}
	return user, r.Header.Values("X-Remote-Group"), nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	user, groups, err := s.authenticate(r)
	if err != nil {
		code, obj := status(apierrors.NewUnauthorized(err.Error()))
		s.record(r, code, "", nil)
		writeJSON(w, code, obj)
		return
	}
	code, obj := s.route(r)
	s.record(r, code, user, groups)
	writeJSON(w, code, obj)
}

// route answers a request with a status code and a JSON object.
func (s *Server) route(r *http.Request) (int, any) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 1 || parts[0] != "apis" {
		return notFound(r.URL.Path)
	}
	parts = parts[1:]
	if r.Method != http.MethodGet {
		return status(apierrors.NewMethodNotSupported(GroupVersionResource.GroupResource(), strings.ToLower(r.Method)))
	}
	switch {
	case len(parts) == 0:
		return http.StatusOK, &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{apiGroup()},
		}
	case parts[0] != Group:
		return notFound(r.URL.Path)
	case len(parts) == 1:
		g := apiGroup()
		return http.StatusOK, &g
	case parts[1] != Version:
		return notFound(r.URL.Path)
	case len(parts) == 2:
		return http.StatusOK, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: GroupVersion.String(),
			APIResources: []metav1.APIResource{{
				Name: Resource, SingularName: "flunder", Namespaced: true, Kind: Kind,
				Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"fl"},
			}},
		}
	}
	// The resource: /flunders, /namespaces/NS/flunders[/NAME].
	rest := parts[2:]
	namespace, name := "", ""
	switch {
	case len(rest) == 1 && rest[0] == Resource:
	case len(rest) == 3 && rest[0] == "namespaces" && rest[2] == Resource:
		namespace = rest[1]
	case len(rest) == 4 && rest[0] == "namespaces" && rest[2] == Resource:
		namespace, name = rest[1], rest[3]
	default:
		return notFound(r.URL.Path)
	}
	asTable := strings.Contains(r.Header.Get("Accept"), "as=Table")
	if name != "" {
		for _, f := range s.opts.Flunders {
			if f.Namespace == namespace && f.Name == name {
				f := s.complete(f)
				if asTable {
					return http.StatusOK, s.table(f)
				}
				return http.StatusOK, &f
			}
		}
		return status(apierrors.NewNotFound(GroupVersionResource.GroupResource(), name))
	}
	var items []Flunder
	for _, f := range s.opts.Flunders {
		if namespace == "" || f.Namespace == namespace {
			items = append(items, s.complete(f))
		}
	}
	if asTable {
		return http.StatusOK, s.table(items...)
	}
	return http.StatusOK, &FlunderList{
		TypeMeta: metav1.TypeMeta{Kind: Kind + "List", APIVersion: GroupVersion.String()},
		ListMeta: metav1.ListMeta{ResourceVersion: "1"},
		Items:    append([]Flunder{}, items...),
	}
}

// complete fills in what a stored object has.
func (s *Server) complete(f Flunder) Flunder {
	f.TypeMeta = metav1.TypeMeta{Kind: Kind, APIVersion: GroupVersion.String()}
	if f.UID == "" {
		f.UID = types.UID("flunder-" + f.Namespace + "-" + f.Name)
	}
	if f.ResourceVersion == "" {
		f.ResourceVersion = "1"
	}
	if f.CreationTimestamp.IsZero() {
		f.CreationTimestamp = metav1.NewTime(s.created.Truncate(time.Second))
	}
	return f
}

// table renders flunders as kubectl asks for them.
func (s *Server) table(items ...Flunder) *metav1.Table {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "1"},
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: "Name of the flunder"},
			{Name: "Color", Type: "string", Description: "The flunder's color"},
			{Name: "Age", Type: "date", Description: "Time since creation"},
		},
		Rows: []metav1.TableRow{},
	}
	for _, f := range items {
		raw, _ := json.Marshal(&f)
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{f.Name, f.Spec.Color, duration.HumanDuration(time.Since(f.CreationTimestamp.Time))},
			Object: runtime.RawExtension{Raw: raw},
		})
	}
	return t
}

func apiGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: GroupVersion.String(), Version: Version}
	return metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             Group,
		Versions:         []metav1.GroupVersionForDiscovery{gv},
		PreferredVersion: gv,
	}
}

func notFound(path string) (int, any) {
	return http.StatusNotFound, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  "the server could not find the requested resource (" + path + ")",
		Reason:   metav1.StatusReasonNotFound,
		Code:     http.StatusNotFound,
	}
}

// status is err as the metav1.Status an apiserver answers.
func status(err *apierrors.StatusError) (int, any) {
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return int(st.Code), &st
}

func writeJSON(w http.ResponseWriter, code int, obj any) {
	b, err := json.Marshal(obj)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":` + strconv.Quote(err.Error()) + `,"code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
