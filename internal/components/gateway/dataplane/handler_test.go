package dataplane

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fixedEndpoints answers every backend with one endpoint, or none for
// the Services in none.
type fixedEndpoints struct {
	addr string
	none map[string]bool
}

func (e fixedEndpoints) Pick(b *Backend) (string, bool) {
	return e.addr, !e.none[b.Service]
}

func (e fixedEndpoints) Ready(b *Backend, endpoint string) bool {
	return endpoint == e.addr && !e.none[b.Service]
}

func prefix(p string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(p)}}
}

func exact(p string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To(p)}}
}

func to(service string) []Backend {
	return []Backend{{Namespace: "ns", Service: service, Port: 80, Weight: 1}}
}

// TestHandler sends requests through a port's handler to a backend that
// says which Service the request was for (the X-Backend header the route
// adds) and echoes what it got.
func TestHandler(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo-Host", r.Host)
		w.Header().Set("X-Echo-Path", r.URL.Path)
		w.Header().Set("X-Echo-Header", r.Header.Get("X-Test"))
		io.WriteString(w, r.Header.Get("X-Backend"))
	}))
	defer backend.Close()
	tag := func(name string) []gatewayv1.HTTPRouteFilter {
		return []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Backend", Value: name}}}}}
	}
	route := func(name string, m gatewayv1.HTTPRouteMatch, extra ...gatewayv1.HTTPRouteFilter) Route {
		return Route{Name: name, Match: m, Filters: append(tag(name), extra...), Backends: to(name)}
	}
	headerMatch := prefix("/")
	headerMatch.Headers = []gatewayv1.HTTPHeaderMatch{{Type: ptr.To(gatewayv1.HeaderMatchExact), Name: "Version", Value: "two"}}
	regexHeader := prefix("/")
	regexHeader.Headers = []gatewayv1.HTTPHeaderMatch{{Type: ptr.To(gatewayv1.HeaderMatchRegularExpression), Name: "Color", Value: "^(red|blue)$"}}
	queryMatch := prefix("/")
	queryMatch.QueryParams = []gatewayv1.HTTPQueryParamMatch{{Type: ptr.To(gatewayv1.QueryParamMatchExact), Name: "animal", Value: "whale"}}
	methodMatch := prefix("/")
	methodMatch.Method = ptr.To(gatewayv1.HTTPMethodPost)
	regexPath := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchRegularExpression), Value: ptr.To(`/re/[0-9]+`)}}
	port := &Port{Port: 80, Hosts: []Host{
		{Hostname: "exact.example.com", Routes: []Route{route("exact-host", prefix("/"))}},
		{Hostname: "*.example.com", Routes: []Route{
			route("wildcard-v2", prefix("/v2")),
			route("wildcard", prefix("/")),
		}},
		{Hostname: "*.deeper.example.com", Routes: []Route{route("deeper", prefix("/"))}},
		{Hostname: "*.iso.example", Routes: func() []Route {
			named := route("iso-named", prefix("/named"))
			named.Hostnames = []string{"a.iso.example"}
			return []Route{named, route("iso-any", prefix("/any"))}
		}()},
		{Routes: []Route{
			route("exact-path", exact("/exact")),
			route("regex-path", regexPath),
			route("prefix-long", prefix("/long/path/")),
			route("header", headerMatch),
			route("regex-header", regexHeader),
			route("query", queryMatch),
			route("method", methodMatch),
			route("redirect", prefix("/redirect"), gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Hostname: ptr.To(gatewayv1.PreciseHostname("elsewhere.example")),
					StatusCode: ptr.To(301)}}),
			route("redirect-https", prefix("/secure"), gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https"),
					Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/safe")}}}),
			route("rewrite", prefix("/old"), gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite,
				URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr.To(gatewayv1.PreciseHostname("rewritten.example")),
					Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/new")}}}),
			route("response-headers", prefix("/respond"), gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier,
				ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Added", Value: "yes"}}, Remove: []string{"X-Echo-Path"}}}),
			{Name: "invalid", Match: prefix("/invalid"), Backends: []Backend{{Service: "gone", Weight: 1, Invalid: true}}},
			{Name: "no-backends", Match: prefix("/nothing")},
			{Name: "zero-weights", Match: prefix("/zero"), Backends: []Backend{{Service: "a", Weight: 0}}},
			route("no-endpoints", prefix("/empty")),
			route("default", prefix("/")),
		}},
	}}
	for i := range port.Hosts[4].Routes {
		if r := &port.Hosts[4].Routes[i]; r.Name == "no-endpoints" {
			r.Backends[0].Service = "empty"
		}
	}
	h := newHandler(80, false, fixedEndpoints{addr: strings.TrimPrefix(backend.URL, "http://"), none: map[string]bool{"empty": true}}, newTransport())
	routes, errs := compile(port)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	h.routes.Store(routes)
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	for _, tc := range []struct {
		name, method, host, path string
		header                   http.Header
		wantCode                 int
		wantBackend              string
		wantHeader               map[string]string // response headers, "" for none
	}{
		{name: "exact host", host: "exact.example.com", path: "/anything", wantBackend: "exact-host"},
		{name: "exact host with a port", host: "exact.example.com:8080", path: "/", wantBackend: "exact-host"},
		{name: "wildcard host, longer prefix first", host: "a.example.com", path: "/v2/x", wantBackend: "wildcard-v2"},
		{name: "wildcard host", host: "a.example.com", path: "/v22", wantBackend: "wildcard"},
		{name: "wildcard of several labels", host: "a.b.example.com", path: "/", wantBackend: "wildcard"},
		{name: "the longest wildcard", host: "a.deeper.example.com", path: "/", wantBackend: "deeper"},
		{name: "a wildcard's own suffix is no match", host: "example.com", path: "/", wantBackend: "default"},
		{name: "a route's own hostname", host: "a.iso.example", path: "/named", wantBackend: "iso-named"},
		{name: "a route's own hostname takes its host's requests: the host's other routes do not", host: "a.iso.example", path: "/any", wantCode: 404},
		{name: "a route without hostnames takes the host's others", host: "b.iso.example", path: "/any", wantBackend: "iso-any"},
		{name: "exact path", host: "other.test", path: "/exact", wantBackend: "exact-path"},
		{name: "exact path, not a prefix", host: "other.test", path: "/exact/more", wantBackend: "default"},
		{name: "regular expression path", host: "other.test", path: "/re/42", wantBackend: "regex-path"},
		{name: "regular expression is anchored", host: "other.test", path: "/re/42/x", wantBackend: "default"},
		{name: "prefix with a trailing slash matches the bare path", host: "other.test", path: "/long/path", wantBackend: "prefix-long"},
		{name: "prefix by path element", host: "other.test", path: "/long/pathology", wantBackend: "default"},
		{name: "header", host: "other.test", path: "/", header: http.Header{"Version": {"two"}}, wantBackend: "header"},
		{name: "header, another value", host: "other.test", path: "/", header: http.Header{"Version": {"three"}}, wantBackend: "default"},
		{name: "regular expression header", host: "other.test", path: "/", header: http.Header{"Color": {"blue"}}, wantBackend: "regex-header"},
		{name: "query parameter", host: "other.test", path: "/?animal=whale", wantBackend: "query"},
		{name: "method", method: http.MethodPost, host: "other.test", path: "/", wantBackend: "method"},
		{name: "redirect: host and status", host: "other.test", path: "/redirect/x?y=1", wantCode: 301,
			wantHeader: map[string]string{"Location": "http://elsewhere.example/redirect/x?y=1"}},
		{name: "redirect: scheme, its own port left out, prefix replaced", host: "other.test", path: "/secure/x", wantCode: 302,
			wantHeader: map[string]string{"Location": "https://other.test/safe/x"}},
		{name: "rewrite: host and prefix", host: "other.test", path: "/old/page", wantBackend: "rewrite",
			wantHeader: map[string]string{"X-Echo-Host": "rewritten.example", "X-Echo-Path": "/new/page"}},
		{name: "response header modifier", host: "other.test", path: "/respond", wantBackend: "response-headers",
			wantHeader: map[string]string{"X-Added": "yes", "X-Echo-Path": ""}},
		{name: "the request's headers reach the backend", host: "other.test", path: "/", header: http.Header{"X-Test": {"kept"}},
			wantBackend: "default", wantHeader: map[string]string{"X-Echo-Header": "kept", "X-Echo-Host": "other.test"}},
		{name: "an invalid backend: 500", host: "other.test", path: "/invalid", wantCode: 500},
		{name: "no backends: 500", host: "other.test", path: "/nothing", wantCode: 500},
		{name: "every weight 0: 500", host: "other.test", path: "/zero", wantCode: 500},
		{name: "no ready endpoint: 503", host: "other.test", path: "/empty", wantCode: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			u, _ := url.Parse(srv.URL + tc.path)
			req := &http.Request{Method: method, URL: u, Host: tc.host, Header: tc.header}
			if req.Header == nil {
				req.Header = http.Header{}
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := tc.wantCode
			if want == 0 {
				want = 200
			}
			if resp.StatusCode != want {
				t.Errorf("status %d, want %d (body %q)", resp.StatusCode, want, body)
			}
			if tc.wantBackend != "" && string(body) != tc.wantBackend {
				t.Errorf("served by %q, want %q", body, tc.wantBackend)
			}
			for k, v := range tc.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("response header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestNoHostMatches(t *testing.T) {
	routes, _ := compile(&Port{Port: 80, Hosts: []Host{{Hostname: "only.example", Routes: []Route{{Name: "r", Match: prefix("/")}}}}})
	if hr := routes.lookup("other.example"); hr != nil {
		t.Errorf("lookup of a host no virtual host has: %v, want none", hr.host.Hostname)
	}
}

func TestReplacePrefix(t *testing.T) {
	// The table of ReplacePrefixMatch in the Gateway API's reference.
	for _, tc := range []struct{ path, prefix, replacement, want string }{
		{"/foo/bar", "/foo", "/xyz", "/xyz/bar"},
		{"/foo/bar", "/foo", "/xyz/", "/xyz/bar"},
		{"/foo/bar", "/foo/", "/xyz", "/xyz/bar"},
		{"/foo/bar", "/foo/", "/xyz/", "/xyz/bar"},
		{"/foo", "/foo", "/xyz", "/xyz"},
		{"/foo/", "/foo", "/xyz", "/xyz/"},
		{"/foo/bar", "/foo", "", "/bar"},
		{"/foo/", "/foo", "", "/"},
		{"/foo", "/foo", "", "/"},
		{"/foo/", "/foo", "/", "/"},
		{"/foo", "/foo", "/", "/"},
	} {
		if got := replacePrefix(tc.path, tc.prefix, tc.replacement); got != tc.want {
			t.Errorf("replacePrefix(%q, %q, %q) = %q, want %q", tc.path, tc.prefix, tc.replacement, got, tc.want)
		}
	}
}

// TestH2C: a request that comes in HTTP/2 in the clear (as gRPC clients
// send it) reaches an h2c backend in HTTP/2, and the backend's trailers
// (gRPC's status) come back.
func TestH2C(t *testing.T) {
	h2c := func() *http.Protocols {
		p := &http.Protocols{}
		p.SetUnencryptedHTTP2(true)
		return p
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("X-Proto", r.Proto)
		io.WriteString(w, r.URL.Path)
		w.Header().Set("Grpc-Status", "0")
	}))
	backend.Config.Protocols = h2c()
	backend.Start()
	defer backend.Close()
	h := newHandler(80, false, fixedEndpoints{addr: strings.TrimPrefix(backend.URL, "http://")}, newTransport())
	backends := to("grpc")
	backends[0].Protocol = ProtocolH2C
	routes, errs := compile(&Port{Port: 80, Hosts: []Host{{Routes: []Route{{Name: "grpc", Match: prefix("/"), Backends: backends}}}}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	h.routes.Store(routes)
	gateway := httptest.NewUnstartedServer(h)
	gateway.Config.Protocols = h2c()
	gateway.Start()
	defer gateway.Close()

	client := &http.Client{Transport: &http.Transport{Protocols: h2c()}}
	resp, err := client.Post(gateway.URL+"/echo.Echo/Ping", "application/grpc", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || resp.Header.Get("X-Proto") != "HTTP/2.0" || string(body) != "/echo.Echo/Ping" {
		t.Errorf("the gateway answered in %s, the backend saw %q and answered %q: want HTTP/2 both ways and the path", resp.Proto, resp.Header.Get("X-Proto"), body)
	}
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Errorf("trailer Grpc-Status %q, want the backend's 0", got)
	}
}

// TestPolicies: a rule's timeouts answer 504 when the request, or a try
// of the backend, takes longer ("0s": no bound); its retry tries again
// on its codes only, as many times as it says, with the body sent again;
// a backendRef's own filters modify the requests it gets and its
// responses.
func TestPolicies(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		hits[q.Get("id")]++
		n := hits[q.Get("id")]
		mu.Unlock()
		if d, err := time.ParseDuration(q.Get("delay")); err == nil {
			time.Sleep(d)
		}
		if fails, _ := strconv.Atoi(q.Get("fail")); n <= fails {
			code, _ := strconv.Atoi(q.Get("code"))
			w.WriteHeader(code)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Backend-Header", r.Header.Get("X-Backend-Header"))
		fmt.Fprintf(w, "%s", body)
	}))
	defer backend.Close()
	h := newHandler(80, false, fixedEndpoints{addr: strings.TrimPrefix(backend.URL, "http://")}, newTransport())
	d := func(s string) *gatewayv1.Duration { return ptr.To(gatewayv1.Duration(s)) }
	backendFiltered := to("web")
	backendFiltered[0].Filters = []gatewayv1.HTTPRouteFilter{
		{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Backend-Header", Value: "set"}}}},
		{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Add: []gatewayv1.HTTPHeader{{Name: "X-Backend-Response", Value: "added"}}}},
	}
	routes, errs := compile(&Port{Port: 80, Hosts: []Host{{Routes: []Route{
		{Name: "request", Match: prefix("/request"), Backends: to("web"), Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: d("200ms")}},
		{Name: "backend", Match: prefix("/backend"), Backends: to("web"), Timeouts: &gatewayv1.HTTPRouteTimeouts{BackendRequest: d("200ms")}},
		{Name: "none", Match: prefix("/none"), Backends: to("web"), Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: d("0s")}},
		{Name: "retry", Match: prefix("/retry"), Backends: to("web"), Retry: &gatewayv1.HTTPRouteRetry{Codes: []gatewayv1.HTTPRouteRetryStatusCode{500}, Attempts: ptr.To(2), Backoff: d("1ms")}},
		{Name: "filtered", Match: prefix("/filtered"), Backends: backendFiltered},
		{Name: "mirrored", Match: prefix("/mirrored"), Backends: to("web"), Mirrors: []Mirror{{Backend: to("copy")[0], Percent: 100}, {Backend: to("never")[0], Percent: 0}}},
	}}}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	h.routes.Store(routes)
	gateway := httptest.NewServer(h)
	defer gateway.Close()

	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		hits                     int // the backend's, 0: not checked
	}{
		{"within the request timeout", "GET", "/request?id=a", "", 200, 1},
		{"past the request timeout", "GET", "/request?id=b&delay=1s", "", 504, 0},
		{"past the backend's timeout", "GET", "/backend?id=c&delay=1s", "", 504, 0},
		{"a timeout of 0s", "GET", "/none?id=d&delay=300ms", "", 200, 1},
		{"two failures, two retries", "GET", "/retry?id=e&fail=2&code=500", "", 200, 3},
		{"three failures, two retries", "GET", "/retry?id=f&fail=3&code=500", "", 500, 3},
		{"a code not retried", "GET", "/retry?id=g&fail=1&code=503", "", 503, 1},
		{"a body sent again", "POST", "/retry?id=h&fail=1&code=500", "the body", 200, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, gateway.URL+tc.path, strings.NewReader(tc.body))
			if tc.body == "" {
				req.Body = http.NoBody
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || tc.code == 200 && string(body) != tc.body {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body, tc.code, tc.body)
			}
			id, _ := url.ParseQuery(strings.SplitN(tc.path, "?", 2)[1])
			mu.Lock()
			got := hits[id.Get("id")]
			mu.Unlock()
			if tc.hits > 0 && got != tc.hits {
				t.Errorf("the backend got %d tries, want %d", got, tc.hits)
			}
		})
	}

	// The mirror's copy arrives beside the request, the body with it;
	// the mirror of 0% gets none.
	resp, err := http.Post(gateway.URL+"/mirrored?id=j", "text/plain", strings.NewReader("copied"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := hits["j"]
		mu.Unlock()
		if got == 2 {
			break
		}
		if got > 2 || time.Now().After(deadline) {
			t.Fatalf("the backend got %d requests for a route with a mirror of 100%% and one of 0%%, want 2", got)
		}
		time.Sleep(10 * time.Millisecond)
	}

	resp, err = http.Get(gateway.URL + "/filtered?id=i")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Echo-Backend-Header") != "set" || resp.Header.Get("X-Backend-Response") != "added" {
		t.Errorf("the backendRef's filters: request header %q, response header %q; want set, added",
			resp.Header.Get("X-Echo-Backend-Header"), resp.Header.Get("X-Backend-Response"))
	}
}

// TestMisdirected: on a TLS port, a request whose Host is served by
// another listener host than the connection's server name chose gets
// 421; one whose names choose the same host, or without a server name,
// is served.
func TestMisdirected(t *testing.T) {
	redirect := func(name string) []Route {
		return []Route{{Name: name, Match: prefix("/"), Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Hostname: ptr.To(gatewayv1.PreciseHostname(name + ".redirect"))}}}}}
	}
	h := newHandler(443, true, fixedEndpoints{}, newTransport())
	routes, errs := compile(&Port{Port: 443, TLS: true, Hosts: []Host{
		{Hostname: "a.example", Routes: redirect("a")},
		{Hostname: "*.wild.example", Routes: redirect("wild")},
		{Routes: redirect("any")},
	}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	h.routes.Store(routes)
	for _, tc := range []struct {
		serverName, host string
		code             int
	}{
		{"a.example", "a.example", http.StatusFound},
		{"a.example", "b.example", http.StatusMisdirectedRequest},
		{"x.wild.example", "y.wild.example", http.StatusFound},
		{"x.wild.example", "a.example", http.StatusMisdirectedRequest},
		{"other.example", "b.example", http.StatusFound},
		{"", "a.example", http.StatusFound},
	} {
		r := httptest.NewRequest(http.MethodGet, "https://"+tc.host+"/", nil)
		r.TLS.ServerName = tc.serverName
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code {
			t.Errorf("server name %q, Host %q: %d, want %d", tc.serverName, tc.host, w.Code, tc.code)
		}
	}
}

// roundRobin answers each Pick with the next of its endpoints.
type roundRobin struct {
	mu    sync.Mutex
	addrs []string
	next  int
}

func (e *roundRobin) Pick(*Backend) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	return e.addrs[e.next%len(e.addrs)], true
}

func (e *roundRobin) Ready(_ *Backend, endpoint string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.addrs, endpoint)
}

// TestRetrySameEndpoint: a retry goes to the endpoint that answered (a
// backend that fails its first tries of a request, counting them itself,
// then succeeds), not to the next of the backend's endpoints.
func TestRetrySameEndpoint(t *testing.T) {
	var addrs []string
	for range 2 {
		var mu sync.Mutex
		tries := map[string]int{}
		b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			tries[r.URL.RawQuery]++
			n := tries[r.URL.RawQuery]
			mu.Unlock()
			if n <= 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		defer b.Close()
		addrs = append(addrs, strings.TrimPrefix(b.URL, "http://"))
	}
	h := newHandler(80, false, &roundRobin{addrs: addrs}, newTransport())
	routes, errs := compile(&Port{Port: 80, Hosts: []Host{{Routes: []Route{{Name: "retry", Match: prefix("/"), Backends: to("web"),
		Retry: &gatewayv1.HTTPRouteRetry{Codes: []gatewayv1.HTTPRouteRetryStatusCode{503}, Attempts: ptr.To(2), Backoff: ptr.To(gatewayv1.Duration("1ms"))}}}}}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	h.routes.Store(routes)
	for i := range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/?request=%d", i), nil))
		if w.Code != http.StatusOK {
			t.Errorf("request %d: %d after two failures and two retries, want 200", i, w.Code)
		}
	}
}
