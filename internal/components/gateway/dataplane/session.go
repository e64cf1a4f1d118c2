package dataplane

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// session is a route's compiled session persistence (GEP-1619): a
// client's first request is served as any other, and its answer carries
// a token (a cookie, or a header the client sends back) naming the
// backend and endpoint that served it; later requests that carry the
// token go to that endpoint while it is a ready endpoint of the backend,
// until the token expires.
type session struct {
	name   string
	header bool          // the token travels in a header, not a cookie
	expiry time.Duration // absoluteTimeout; 0: none
	// permanent: the cookie has a Max-Age (lifetimeType Permanent), else
	// it lasts the client's session.
	permanent bool
	path      string // the cookie's Path: the route's path prefix
}

// compileSession compiles r's session persistence, if it has one.
func compileSession(r *Route, expiry time.Duration) *session {
	sp := r.SessionPersistence
	if sp == nil {
		return nil
	}
	s := &session{name: ptr.Deref(sp.SessionName, ""), expiry: expiry, path: "/",
		header: ptr.Deref(sp.Type, gatewayv1.CookieBasedSessionPersistence) == gatewayv1.HeaderBasedSessionPersistence}
	if s.name == "" {
		// One of the rule's own, so that two rules' sessions do not mix.
		h := fnv.New32a()
		h.Write([]byte(r.Name))
		s.name = fmt.Sprintf("kubeboot-session-%08x", h.Sum32())
	}
	if c := sp.CookieConfig; c != nil {
		s.permanent = ptr.Deref(c.LifetimeType, gatewayv1.SessionCookieLifetimeType) == gatewayv1.PermanentCookieLifetimeType && expiry > 0
	}
	if p := r.Match.Path; p != nil && p.Value != nil && ptr.Deref(p.Type, gatewayv1.PathMatchPathPrefix) != gatewayv1.PathMatchRegularExpression {
		s.path = *p.Value
	}
	return s
}

// token names backend (its index among the route's) and endpoint, and
// when it expires (Unix seconds, 0: never). It is not secret: a client
// that changes it can only choose among the backend's ready endpoints,
// which a request may reach anyway.
func (s *session) token(backend int, endpoint string, now time.Time) string {
	var expires int64
	if s.expiry > 0 {
		expires = now.Add(s.expiry).Unix()
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(backend) + "|" + endpoint + "|" + strconv.FormatInt(expires, 10)))
}

// parse reads a token: its backend and endpoint, false if it is not one
// or expired.
func (s *session) parse(tok string, now time.Time) (int, string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, "", false
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 {
		return 0, "", false
	}
	backend, err1 := strconv.Atoi(parts[0])
	expires, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || expires != 0 && now.Unix() >= expires {
		return 0, "", false
	}
	return backend, parts[1], true
}

// resume is the backend and endpoint r's token names, if it carries one
// that is valid for route and the endpoint is still ready.
func (h *handler) resume(r *http.Request, route *compiledRoute) (*Backend, string, bool) {
	s := route.session
	var tok string
	if s.header {
		tok = r.Header.Get(s.name)
	} else if c, err := r.Cookie(s.name); err == nil {
		tok = c.Value
	}
	if tok == "" {
		return nil, "", false
	}
	i, endpoint, ok := s.parse(tok, time.Now())
	if !ok || i < 0 || i >= len(route.Backends) {
		return nil, "", false
	}
	b := &route.Backends[i]
	if b.Invalid || b.Weight <= 0 || !h.endpoints.Ready(b, endpoint) {
		return nil, "", false
	}
	return b, endpoint, true
}

// begin gives the answer w writes the token of backend and endpoint.
func (s *session) begin(w http.ResponseWriter, route *compiledRoute, backend *Backend, endpoint string) {
	i := 0
	for i < len(route.Backends) && &route.Backends[i] != backend {
		i++
	}
	now := time.Now()
	tok := s.token(i, endpoint, now)
	if s.header {
		w.Header().Set(s.name, tok)
		return
	}
	c := &http.Cookie{Name: s.name, Value: tok, Path: s.path, HttpOnly: true}
	if s.permanent {
		c.MaxAge = int(s.expiry / time.Second)
	}
	w.Header().Add("Set-Cookie", c.String())
}
