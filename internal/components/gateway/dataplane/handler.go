package dataplane

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Endpoints are the ready endpoints of Services' ports.
type Endpoints interface {
	// Pick returns a ready endpoint (host:port) of the backend's Service
	// port, false if it has none.
	Pick(b *Backend) (string, bool)
}

// handler serves one port: it matches each request to a route of the
// port's routes (swapped whole when the configuration changes) and
// answers it.
type handler struct {
	port      int32
	tls       bool
	routes    atomic.Pointer[portRoutes]
	endpoints Endpoints
	proxy     *httputil.ReverseProxy
}

// proxied is what a proxied request carries to the proxy's hooks.
type proxied struct {
	target   string // the endpoint, host:port
	protocol string // the backend's Protocol
	response *gatewayv1.HTTPHeaderFilter
}

type proxiedKey struct{}

func newHandler(port int32, tls bool, endpoints Endpoints, transport http.RoundTripper) *handler {
	h := &handler{port: port, tls: tls, endpoints: endpoints}
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			p := pr.In.Context().Value(proxiedKey{}).(*proxied)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", p.target
			// The request's Host goes on as it came (or as a rewrite
			// set it), as a Gateway's backends expect.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			if p := resp.Request.Context().Value(proxiedKey{}).(*proxied); p.response != nil {
				modifyHeaders(resp.Header, p.response)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			klog.FromContext(r.Context()).V(4).Info("Proxying failed", "host", r.Host, "path", r.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	routes := h.routes.Load()
	name := requestHost(r.Host)
	var host *hostRoutes
	if routes != nil {
		host = routes.lookup(name)
	}
	var route *compiledRoute
	if host != nil {
		route = host.match(name, r)
	}
	if route == nil {
		http.NotFound(w, r)
		return
	}
	var response *gatewayv1.HTTPHeaderFilter
	for _, f := range route.Filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			if f.RequestHeaderModifier != nil {
				modifyHeaders(r.Header, f.RequestHeaderModifier)
			}
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			response = f.ResponseHeaderModifier
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			if f.RequestRedirect != nil {
				h.redirect(w, r, route, f.RequestRedirect, response)
				return
			}
		case gatewayv1.HTTPRouteFilterURLRewrite:
			if f.URLRewrite != nil {
				rewrite(r, route, f.URLRewrite)
			}
		}
	}
	backend := pickBackend(route.Backends)
	if backend == nil || backend.Invalid {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	target, ok := h.endpoints.Pick(backend)
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	ctx := context.WithValue(r.Context(), proxiedKey{}, &proxied{target: target, protocol: backend.Protocol, response: response})
	h.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// pickBackend chooses a backend by weight: nil if there is none, or if
// every weight is 0.
func pickBackend(backends []Backend) *Backend {
	var total int64
	for i := range backends {
		total += int64(max(backends[i].Weight, 0))
	}
	if total == 0 {
		return nil
	}
	n := rand.Int64N(total)
	for i := range backends {
		if n -= int64(max(backends[i].Weight, 0)); n < 0 {
			return &backends[i]
		}
	}
	return nil
}

// modifyHeaders applies a header modifier: set, then add, then remove.
func modifyHeaders(h http.Header, f *gatewayv1.HTTPHeaderFilter) {
	for _, s := range f.Set {
		h.Set(string(s.Name), s.Value)
	}
	for _, a := range f.Add {
		h.Add(string(a.Name), a.Value)
	}
	for _, name := range f.Remove {
		h.Del(name)
	}
}

// modifiedPath is path as a path modifier makes it; the route's prefix is
// what ReplacePrefixMatch replaces.
func modifiedPath(path string, route *compiledRoute, m *gatewayv1.HTTPPathModifier) string {
	switch {
	case m.Type == gatewayv1.FullPathHTTPPathModifier && m.ReplaceFullPath != nil:
		return *m.ReplaceFullPath
	case m.Type == gatewayv1.PrefixMatchHTTPPathModifier && m.ReplacePrefixMatch != nil:
		prefix := "/"
		if p := route.Match.Path; p != nil && p.Value != nil {
			prefix = *p.Value
		}
		return replacePrefix(path, prefix, *m.ReplacePrefixMatch)
	}
	return path
}

// rewrite applies a URL rewrite to r before it is proxied.
func rewrite(r *http.Request, route *compiledRoute, f *gatewayv1.HTTPURLRewriteFilter) {
	if f.Hostname != nil {
		r.Host = string(*f.Hostname)
	}
	if f.Path != nil {
		r.URL.Path = modifiedPath(r.URL.Path, route, f.Path)
		r.URL.RawPath = ""
	}
}

// redirect answers r with the redirect f describes: the request's URL
// with the filter's scheme, host, port and path; a port that is the
// scheme's own is left out of the Location.
func (h *handler) redirect(w http.ResponseWriter, r *http.Request, route *compiledRoute, f *gatewayv1.HTTPRequestRedirectFilter, response *gatewayv1.HTTPHeaderFilter) {
	scheme := "http"
	if h.tls {
		scheme = "https"
	}
	host := r.Host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		host = hn
	}
	port := strconv.Itoa(int(h.port))
	if f.Scheme != nil {
		scheme = *f.Scheme
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	if f.Hostname != nil {
		host = string(*f.Hostname)
	}
	if f.Port != nil {
		port = strconv.Itoa(int(*f.Port))
	}
	path := r.URL.Path
	if f.Path != nil {
		path = modifiedPath(path, route, f.Path)
	}
	u := url.URL{Scheme: scheme, Host: host, Path: path, RawQuery: r.URL.RawQuery}
	if port != "" && !(scheme == "http" && port == "80" || scheme == "https" && port == "443") {
		u.Host = net.JoinHostPort(host, port)
	}
	code := http.StatusFound
	if f.StatusCode != nil {
		code = *f.StatusCode
	}
	if response != nil {
		modifyHeaders(w.Header(), response)
	}
	w.Header().Set("Location", u.String())
	w.WriteHeader(code)
}

// transport reaches each backend in its protocol: HTTP/1.1, or HTTP/2 in
// the clear (gRPC's).
type transport struct {
	http1, h2c *http.Transport
}

// newTransport is how the nodes reach the backends: kept-alive
// connections, bounded waits for a connection and for a response's
// headers never (a stream may wait long).
func newTransport() *transport {
	t := func(protocols func(*http.Protocols)) *http.Transport {
		p := &http.Protocols{}
		protocols(p)
		return &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			// What the client asked for, as it asked: no compression added.
			DisableCompression: true,
			Protocols:          p,
		}
	}
	return &transport{
		http1: t(func(p *http.Protocols) { p.SetHTTP1(true) }),
		h2c:   t(func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }),
	}
}

// RoundTrip implements http.RoundTripper for the proxy.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if p, ok := r.Context().Value(proxiedKey{}).(*proxied); ok && p.protocol == ProtocolH2C {
		return t.h2c.RoundTrip(r)
	}
	return t.http1.RoundTrip(r)
}
