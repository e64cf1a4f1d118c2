package dataplane

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
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
	// Ready reports whether endpoint (host:port) is a ready endpoint of
	// the backend's Service port.
	Ready(b *Backend, endpoint string) bool
}

// handler serves one port: it matches each request to a route of the
// port's routes (swapped whole when the configuration changes) and
// answers it.
type handler struct {
	port      int32
	tls       bool
	routes    atomic.Pointer[portRoutes]
	endpoints Endpoints
	transport *transport
	proxy     *httputil.ReverseProxy
}

// proxied is what a proxied request carries to the proxy's hooks and
// the transport.
type proxied struct {
	target string // the endpoint, host:port
	// backend is the backend's, route the route's (its timeouts and
	// retry), repick another endpoint of the backend for a retry.
	backend *Backend
	route   *compiledRoute
	repick  func() (string, bool)
	// response are the response header modifiers, the route's then the
	// backend's.
	response []*gatewayv1.HTTPHeaderFilter
}

type proxiedKey struct{}

func newHandler(port int32, tls bool, endpoints Endpoints, transport *transport) *handler {
	h := &handler{port: port, tls: tls, endpoints: endpoints, transport: transport}
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			p := pr.In.Context().Value(proxiedKey{}).(*proxied)
			pr.Out.URL.Scheme, pr.Out.URL.Host = p.backend.scheme(), p.target
			// The request's Host goes on as it came (or as a rewrite
			// set it), as a Gateway's backends expect.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport:  transport,
		BufferPool: bufferPool{},
		ModifyResponse: func(resp *http.Response) error {
			for _, f := range resp.Request.Context().Value(proxiedKey{}).(*proxied).response {
				modifyHeaders(resp.Header, f)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			klog.FromContext(r.Context()).V(4).Info("Proxying failed", "host", r.Host, "path", r.URL.Path, "err", err)
			if errors.Is(err, context.DeadlineExceeded) {
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			}
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
	// A request on a TLS connection whose server name chose another
	// listener's host (and certificate) than its Host header does is
	// misdirected (RFC 9110 15.5.20): an HTTP/2 client that reused the
	// connection for another name asks again on a new one.
	if h.tls && r.TLS != nil && r.TLS.ServerName != "" && routes != nil && routes.lookup(requestHost(r.TLS.ServerName)) != host {
		http.Error(w, "Misdirected Request", http.StatusMisdirectedRequest)
		return
	}
	var route *compiledRoute
	if host != nil {
		route = host.match(name, r)
	}
	if route == nil {
		http.NotFound(w, r)
		return
	}
	if route.requestTimeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), route.requestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	var response []*gatewayv1.HTTPHeaderFilter
	for _, f := range route.Filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			if f.RequestHeaderModifier != nil {
				modifyHeaders(r.Header, f.RequestHeaderModifier)
			}
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			if f.ResponseHeaderModifier != nil {
				response = append(response, f.ResponseHeaderModifier)
			}
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			if f.RequestRedirect != nil {
				h.redirect(w, r, route, f.RequestRedirect, response)
				return
			}
		case gatewayv1.HTTPRouteFilterURLRewrite:
			if f.URLRewrite != nil {
				rewrite(r, route, f.URLRewrite)
			}
		case gatewayv1.HTTPRouteFilterCORS:
			if f.CORS != nil {
				headers, answered := cors(w, r, f.CORS)
				if answered {
					return
				}
				if headers != nil {
					response = append(response, headers)
				}
			}
		}
	}
	var backend *Backend
	var target string
	resumed := false
	if route.session != nil {
		backend, target, resumed = h.resume(r, route)
	}
	if !resumed {
		backend = pickBackend(route.Backends)
	}
	if backend == nil || backend.Invalid {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	for _, f := range backend.Filters {
		switch {
		case f.Type == gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			modifyHeaders(r.Header, f.RequestHeaderModifier)
		case f.Type == gatewayv1.HTTPRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
			response = append(response, f.ResponseHeaderModifier)
		}
	}
	if !resumed {
		var ok bool
		if target, ok = h.endpoints.Pick(backend); !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if route.session != nil {
			route.session.begin(w, route, backend, target)
		}
	}
	if (route.retries > 0 || len(route.Mirrors) > 0) && !replayable(r) {
		klog.FromContext(r.Context()).V(4).Info("A request's body is too large to send again: no retries or mirrors", "route", route.Name)
	}
	h.mirror(r, route)
	p := &proxied{target: target, backend: backend, route: route, response: response,
		repick: func() (string, bool) { return h.endpoints.Pick(backend) }}
	h.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxiedKey{}, p)))
}

// mirrorTimeout bounds a mirrored request.
const mirrorTimeout = 30 * time.Second

// mirror sends a copy of r to each of the route's mirrors that draws it,
// in the background, its answer dropped; r's body must be replayable
// (GetBody), else no copy goes.
func (h *handler) mirror(r *http.Request, route *compiledRoute) {
	for i := range route.Mirrors {
		m := &route.Mirrors[i]
		if r.GetBody == nil || m.Percent < 100 && rand.Float64()*100 >= m.Percent {
			continue
		}
		target, ok := h.endpoints.Pick(&m.Backend)
		body, err := r.GetBody()
		if !ok || err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), mirrorTimeout)
		req := r.Clone(ctx)
		req.Body, req.RequestURI = body, ""
		req.URL.Scheme, req.URL.Host = m.Backend.scheme(), target
		for _, hop := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
			req.Header.Del(hop)
		}
		rt := h.transport.of(&m.Backend)
		go func() {
			defer cancel()
			resp, err := rt.RoundTrip(req)
			if err != nil {
				klog.FromContext(ctx).V(4).Info("A mirrored request failed", "route", route.Name, "err", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
}

// maxReplayBody bounds the body a request may have to be tried again: it
// is kept in memory until the request ends.
const maxReplayBody = 64 << 10

// replayable makes r's body one that can be sent again (GetBody), if it
// is small enough and of a known length, and says whether it is.
func replayable(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		return true
	}
	if r.ContentLength < 0 || r.ContentLength > maxReplayBody {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReplayBody+1))
	if err != nil || int64(len(body)) != r.ContentLength {
		// Read, it cannot be sent at all: the backend gets what came.
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return true
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
func (h *handler) redirect(w http.ResponseWriter, r *http.Request, route *compiledRoute, f *gatewayv1.HTTPRequestRedirectFilter, response []*gatewayv1.HTTPHeaderFilter) {
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
	for _, m := range response {
		modifyHeaders(w.Header(), m)
	}
	w.Header().Set("Location", u.String())
	w.WriteHeader(code)
}

// transport reaches each backend in its protocol: HTTP/1.1, or HTTP/2 in
// the clear (gRPC's), or over TLS as its BackendTLSPolicy says.
type transport struct {
	http1, h2c *http.Transport
	tls        tlsTransports
}

// of is the transport that reaches b.
func (t *transport) of(b *Backend) http.RoundTripper {
	switch {
	case b.TLS != nil && b.TLS.rt != nil:
		return b.TLS.rt
	case b.TLS != nil:
		return failedTransport{b.TLS.err}
	case b.Protocol == ProtocolH2C:
		return t.h2c
	}
	return t.http1
}

// failedTransport answers every request with the error that made a TLS
// backend's transport impossible (a 502): its certificates did not parse.
type failedTransport struct{ err error }

func (f failedTransport) RoundTrip(*http.Request) (*http.Response, error) {
	if f.err == nil {
		return nil, errors.New("no transport was made for the backend's TLS")
	}
	return nil, f.err
}

// scheme is the URL scheme b is reached by.
func (b *Backend) scheme() string {
	if b.TLS != nil {
		return "https"
	}
	return "http"
}

// copyBuffers are the proxy's buffers for copying bodies, reused: without
// a pool it allocates 32 KiB for every request.
var copyBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// bufferPool is copyBuffers as httputil.BufferPool.
type bufferPool struct{}

func (bufferPool) Get() []byte { return copyBuffers.Get().(*[32 << 10]byte)[:] }
func (bufferPool) Put(b []byte) {
	if len(b) == 32<<10 {
		copyBuffers.Put((*[32 << 10]byte)(b))
	}
}

// newTransport is how the nodes reach the backends: kept-alive
// connections, bounded waits for a connection and for a response's
// headers never (a stream may wait long).
func newTransport() *transport {
	http1, h2c := &http.Protocols{}, &http.Protocols{}
	http1.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	return &transport{http1: baseTransport(http1), h2c: baseTransport(h2c)}
}

// baseTransport is every transport's setting, speaking protocols.
func baseTransport(protocols *http.Protocols) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		// What the client asked for, as it asked: no compression added.
		DisableCompression: true,
		Protocols:          protocols,
	}
}

// RoundTrip implements http.RoundTripper for the proxy: each try bounded
// by the route's backendRequest timeout, tried again as its retry says.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	p, ok := r.Context().Value(proxiedKey{}).(*proxied)
	if !ok {
		return t.http1.RoundTrip(r)
	}
	rt := t.of(p.backend)
	retries := p.route.retries
	if r.GetBody == nil {
		retries = 0
	}
	target := r.URL.Host
	for try := 0; ; try++ {
		req := r
		if try > 0 {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			req = r.Clone(r.Context())
			req.Body, req.URL.Host = body, target
		}
		resp, err := tryOnce(rt, req, p.route.backendTimeout)
		if err != nil {
			// The same endpoint is tried again (its answers are the
			// request's, as a client trying again would see them),
			// unless it refused the connection.
			if next, ok := p.repick(); ok {
				target = next
			}
		}
		if try == retries || !p.route.retryable(resp, err) {
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(p.route.backoff):
		}
	}
}

// tryOnce sends req, bounded by timeout if set: the bound holds until the
// response's body is closed.
func tryOnce(rt http.RoundTripper, req *http.Request, timeout time.Duration) (*http.Response, error) {
	if timeout <= 0 {
		return rt.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	resp, err := rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// cancelOnClose cancels a try's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

// retryable reports whether a try's outcome is tried again: a response
// of one of the route's retry codes, or a connection the backend did not
// accept (the request never reached it).
func (cr *compiledRoute) retryable(resp *http.Response, err error) bool {
	if err != nil {
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "dial"
	}
	return cr.retryCodes[resp.StatusCode]
}
