package dataplane

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestOriginMatches(t *testing.T) {
	for _, tc := range []struct {
		allowed, origin string
		want            bool
	}{
		{"*", "https://any.example:8443", true},
		{"https://www.foo.com", "https://www.foo.com", true},
		{"https://www.foo.com", "http://www.foo.com", false},
		{"https://*.bar.com", "https://www.bar.com", true},
		{"https://*.bar.com", "https://a.b.bar.com", true},
		{"https://*.bar.com", "https://bar.com", false},
		{"https://*.bar.com", "http://www.bar.com", false},
		{"https://*.bar.com", "https://www.bar.com:8443", false},
		{"https://*.bar.com:8443", "https://www.bar.com:8443", true},
		{"https://*.bar.com", "https://www.foobar.com", false},
	} {
		if got := originMatches(tc.allowed, tc.origin); got != tc.want {
			t.Errorf("originMatches(%q, %q) = %v, want %v", tc.allowed, tc.origin, got, tc.want)
		}
	}
}

// TestCORS: a preflight from an allowed origin is answered here with
// what the filter allows (a wildcard method or header named as asked);
// one from another origin, or for a method not allowed, gets no CORS
// header; a request from an allowed origin goes on, its response to get
// the origin, credentials and exposed headers.
func TestCORS(t *testing.T) {
	filter := &gatewayv1.HTTPCORSFilter{
		AllowOrigins:     []gatewayv1.CORSOrigin{"https://www.foo.com", "https://*.bar.com"},
		AllowMethods:     []gatewayv1.HTTPMethodWithWildcard{"GET", "OPTIONS"},
		AllowHeaders:     []gatewayv1.HTTPHeaderName{"x-header-1"},
		ExposeHeaders:    []gatewayv1.HTTPHeaderName{"x-header-3"},
		AllowCredentials: ptr.To(true),
		MaxAge:           3600,
	}
	wildcard := &gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"*"}, AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*"},
		AllowHeaders: []gatewayv1.HTTPHeaderName{"*"}}
	request := func(method, origin, requested string) *http.Request {
		r := httptest.NewRequest(method, "/", nil)
		r.Header.Set("Origin", origin)
		if requested != "" {
			r.Header.Set("Access-Control-Request-Method", requested)
			r.Header.Set("Access-Control-Request-Headers", "x-header-1")
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		filter   *gatewayv1.HTTPCORSFilter
		r        *http.Request
		answered bool
		want     map[string]string // "": absent
	}{
		{"preflight, allowed", filter, request("OPTIONS", "https://a.bar.com", "GET"), true, map[string]string{
			"Access-Control-Allow-Origin": "https://a.bar.com", "Access-Control-Allow-Methods": "GET, OPTIONS", "Access-Control-Allow-Headers": "x-header-1",
			"Access-Control-Expose-Headers": "x-header-3", "Access-Control-Max-Age": "3600", "Access-Control-Allow-Credentials": "true"}},
		{"preflight, origin not allowed", filter, request("OPTIONS", "https://foobar.com", "GET"), true, map[string]string{"Access-Control-Allow-Origin": ""}},
		{"preflight, method not allowed", filter, request("OPTIONS", "https://www.foo.com", "PUT"), true, map[string]string{"Access-Control-Allow-Origin": ""}},
		{"preflight, wildcards", wildcard, request("OPTIONS", "https://x.test:1234", "PUT"), true, map[string]string{
			"Access-Control-Allow-Origin": "https://x.test:1234", "Access-Control-Allow-Methods": "PUT", "Access-Control-Allow-Headers": "x-header-1",
			"Access-Control-Max-Age": "5", "Access-Control-Allow-Credentials": ""}},
		{"request, allowed", filter, request("GET", "https://www.foo.com", ""), false, map[string]string{
			"Access-Control-Allow-Origin": "https://www.foo.com", "Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "x-header-3"}},
		{"request, origin not allowed", filter, request("GET", "https://foobar.com", ""), false, map[string]string{"Access-Control-Allow-Origin": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			response, answered := cors(w, tc.r, tc.filter)
			if answered != tc.answered {
				t.Fatalf("answered %v, want %v", answered, tc.answered)
			}
			got := w.Header()
			if !answered {
				got = http.Header{}
				if response != nil {
					modifyHeaders(got, response)
				}
			} else if w.Code != http.StatusNoContent {
				t.Errorf("preflight answered %d, want 204", w.Code)
			}
			for name, want := range tc.want {
				if v := got.Get(name); v != want {
					t.Errorf("%s: %q, want %q", name, v, want)
				}
			}
		})
	}
}
