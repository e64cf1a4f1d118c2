package loopback

import (
	"context"
	"net"
	"net/http"
	"sync"

	"github.com/kubeboot/kubeboot/internal/platform/cpulabels"
)

// DialContext connects to the server in-process: it returns one end of an
// in-memory connection whose other end an HTTP server serves with the
// transport's handler. A client configuration whose Dial is DialContext
// and whose host is an http:// URL reaches the server without a network,
// as RoundTrip does, and keeps doing so in copies that drop the
// configuration's Transport: rest.AnonymousClientConfig keeps only Dial,
// and kube-controller-manager builds its per-controller service account
// clients from such a copy. The connection speaks plain HTTP/1.1; it
// never leaves the process. Before SetHandler it waits as RoundTrip does;
// after SetHandler(nil), which also closes the connections, it fails with
// ErrNotServing.
func (t *Transport) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	if _, err := t.waitHandler(ctx); err != nil {
		return nil, err
	}
	t.dialMu.Lock()
	if t.dial == nil {
		t.dial = newPipeServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Profiled, the work is the API server's, for the component
			// that dialled (its connection's goroutine is the pipe
			// server's, labelled as the first dialler).
			cpulabels.Serving(r.Context(), cpulabels.APIServer)
			h := t.handler.Load()
			if h == nil {
				http.Error(w, ErrNotServing.Error(), http.StatusServiceUnavailable)
				return
			}
			(*h).ServeHTTP(w, r)
		}))
	}
	dial := t.dial
	t.dialMu.Unlock()
	return dial.connect(ctx)
}

// closeDial stops the server behind DialContext, if one was started.
func (t *Transport) closeDial() {
	t.dialMu.Lock()
	dial := t.dial
	t.dial = nil
	t.dialMu.Unlock()
	if dial != nil {
		dial.close()
	}
}

// pipeServer is an http.Server on a listener of in-memory connections.
type pipeServer struct {
	server *http.Server
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeServer(h http.Handler) *pipeServer {
	s := &pipeServer{server: &http.Server{Handler: h, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		if sc, ok := c.(servedConn); ok && sc.client != "" {
			return cpulabels.With(ctx, sc.client)
		}
		return ctx
	}}, conns: make(chan net.Conn), closed: make(chan struct{})}
	go func() { _ = s.server.Serve(pipeListener{s}) }()
	return s
}

// connect hands the server one end of a new connection and returns the
// other.
func (s *pipeServer) connect(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case s.conns <- servedConn{localConn{server}, cpulabels.Of(ctx)}:
		return localConn{client}, nil
	case <-s.closed:
	case <-ctx.Done():
		_ = client.Close()
		_ = server.Close()
		return nil, ctx.Err()
	}
	_ = client.Close()
	_ = server.Close()
	return nil, ErrNotServing
}

func (s *pipeServer) close() {
	s.once.Do(func() {
		close(s.closed)
		_ = s.server.Close()
	})
}

// pipeListener is the server's side of pipeServer.
type pipeListener struct{ s *pipeServer }

func (l pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.s.conns:
		return c, nil
	case <-l.s.closed:
		return nil, net.ErrClosed
	}
}

func (l pipeListener) Close() error   { return nil }
func (l pipeListener) Addr() net.Addr { return loopbackAddr }

// localConn is an in-memory connection that reports loopback addresses,
// as RoundTrip's requests do, so that what the server logs and audits of
// a client's address is an IP.
type localConn struct{ net.Conn }

func (c localConn) LocalAddr() net.Addr  { return loopbackAddr }
func (c localConn) RemoteAddr() net.Addr { return loopbackAddr }

var loopbackAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

// servedConn is the server's end of a connection, with the component
// that dialled it (cpulabels), for the server's requests' labels.
type servedConn struct {
	localConn
	client string
}
