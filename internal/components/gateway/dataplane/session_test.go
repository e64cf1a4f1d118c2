package dataplane

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestSessionPersistence: a client's requests that carry the token its
// first answer gave (a cookie, or a header) go to the endpoint that
// served the first, which the backend would otherwise rotate through,
// while that endpoint is ready; then to another, with a new token.
func TestSessionPersistence(t *testing.T) {
	var addrs []string
	for _, name := range []string{"a", "b", "c"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) }))
		defer srv.Close()
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	for _, tc := range []struct {
		name string
		sp   gatewayv1.SessionPersistence
	}{
		{"a session cookie", gatewayv1.SessionPersistence{}},
		{"a permanent cookie", gatewayv1.SessionPersistence{SessionName: ptr.To("sticky"), AbsoluteTimeout: ptr.To(gatewayv1.Duration("1h")),
			CookieConfig: &gatewayv1.CookieConfig{LifetimeType: ptr.To(gatewayv1.PermanentCookieLifetimeType)}}},
		{"a header", gatewayv1.SessionPersistence{SessionName: ptr.To("X-Session"), Type: ptr.To(gatewayv1.HeaderBasedSessionPersistence)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps := &roundRobin{addrs: slices.Clone(addrs)}
			h := newHandler(80, false, eps, newTransport())
			routes, errs := compile(&Port{Port: 80, Hosts: []Host{{Routes: []Route{{Name: "HTTPRoute app/web rule 0", Match: prefix("/app"),
				Backends: to("web"), SessionPersistence: &tc.sp}}}}})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			h.routes.Store(routes)
			get := func(token func(*http.Request)) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodGet, "http://app.example/app/x", nil)
				if token != nil {
					token(r)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			first := get(nil)
			var carry func(*http.Request)
			if tc.sp.Type != nil {
				tok := first.Header().Get("X-Session")
				if tok == "" {
					t.Fatalf("no session header in %v", first.Header())
				}
				carry = func(r *http.Request) { r.Header.Set("X-Session", tok) }
			} else {
				cookies := first.Result().Cookies()
				if len(cookies) != 1 || cookies[0].Path != "/app" || !cookies[0].HttpOnly {
					t.Fatalf("cookies %v, want one, HttpOnly, for /app", cookies)
				}
				if permanent := cookies[0].MaxAge == 3600; permanent != (tc.sp.CookieConfig != nil) || tc.sp.SessionName != nil && cookies[0].Name != "sticky" {
					t.Errorf("cookie %v: want Max-Age only for a permanent one, the rule's name if it has one", cookies[0])
				}
				c := cookies[0]
				carry = func(r *http.Request) { r.AddCookie(c) }
			}
			for range 5 {
				if got := get(carry).Body.String(); got != first.Body.String() {
					t.Fatalf("a request with the token went to %s, the first to %s", got, first.Body.String())
				}
			}
			// Its endpoint gone, the session moves, with a new token.
			eps.mu.Lock()
			for i, a := range eps.addrs {
				if endpointServes(a, first.Body.String()) {
					eps.addrs = append(eps.addrs[:i], eps.addrs[i+1:]...)
					break
				}
			}
			eps.mu.Unlock()
			moved := get(carry)
			if moved.Body.String() == first.Body.String() || moved.Code != http.StatusOK {
				t.Errorf("after its endpoint went: %d %q", moved.Code, moved.Body.String())
			}
			if moved.Header().Get("X-Session") == "" && moved.Header().Get("Set-Cookie") == "" {
				t.Error("a moved session got no new token")
			}
		})
	}
}

// TestSessionTokenExpires: a token past the rule's absoluteTimeout, or
// not a token, resumes nothing.
func TestSessionTokenExpires(t *testing.T) {
	s := &session{expiry: time.Minute}
	now := time.Now()
	tok := s.token(1, "10.0.0.1:80", now)
	if b, ep, ok := s.parse(tok, now.Add(30*time.Second)); !ok || b != 1 || ep != "10.0.0.1:80" {
		t.Errorf("a token within its time: %d %q %t", b, ep, ok)
	}
	if _, _, ok := s.parse(tok, now.Add(2*time.Minute)); ok {
		t.Error("an expired token resumed its session")
	}
	for _, bad := range []string{"", "!!", "YWJj"} {
		if _, _, ok := s.parse(bad, now); ok {
			t.Errorf("%q resumed a session", bad)
		}
	}
}

// endpointServes reports whether the endpoint at addr answers name.
func endpointServes(addr, name string) bool {
	resp, err := http.Get("http://" + addr)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b) == name
}
