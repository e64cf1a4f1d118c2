package dataplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// handshakeTimeout bounds how long a passthrough connection may take to
// send its ClientHello.
const handshakeTimeout = 10 * time.Second

// passthrough serves a TLS port: it reads the server name of each
// connection's ClientHello, and splices the connection, those bytes
// first, to an endpoint of the route's backend, so that the TLS session
// is the client's and the backend's; or, where the host has a
// certificate (a listener of mode Terminate), ends the session with it
// and splices what it carries, in the clear.
type passthrough struct {
	port      int32
	ln        net.Listener
	routes    atomic.Pointer[portRoutes]
	certs     atomic.Pointer[certIndex]
	endpoints Endpoints
	dialer    net.Dialer

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both ends of each connection passed through
	closed bool
	done   sync.WaitGroup
}

func newPassthrough(port int32, ln net.Listener, endpoints Endpoints) *passthrough {
	return &passthrough{port: port, ln: ln, endpoints: endpoints, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		conns: map[net.Conn]struct{}{}}
}

// serve passes the connections ln hands it through, until it closes.
func (p *passthrough) serve(ctx context.Context) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			// The port's socket hands the connections over (connQueue),
			// which fails only once closed.
			return
		}
		if !p.track(c, true) {
			c.Close()
			return
		}
		p.done.Add(1)
		go func() {
			defer p.done.Done()
			defer p.track(c, false)
			defer c.Close()
			if err := p.handle(ctx, c); err != nil {
				klog.FromContext(ctx).V(4).Info("A passthrough connection ended", "port", p.port, "client", c.RemoteAddr(), "err", err)
			}
		}()
	}
}

// track adds or removes an open connection; false once the port closed.
func (p *passthrough) track(c net.Conn, open bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if open {
		if p.closed {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

// handle passes c through to the backend its server name routes to; a
// connection no route takes, or whose backend has no endpoint, is closed.
func (p *passthrough) handle(ctx context.Context, c net.Conn) error {
	if err := c.SetReadDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return err
	}
	name, hello, err := readServerName(c)
	if err != nil {
		return err
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	routes := p.routes.Load()
	host := requestHost(name)
	var hr *hostRoutes
	if routes != nil {
		hr = routes.lookup(host)
	}
	var candidates []*compiledRoute
	if hr != nil {
		candidates = hr.routes(host)
	}
	if len(candidates) == 0 {
		return errors.New("no route for server name " + name)
	}
	backend := pickBackend(candidates[0].Backends)
	if backend == nil || backend.Invalid {
		return errors.New(candidates[0].Name + " has no valid backend")
	}
	target, ok := p.endpoints.Pick(backend)
	if !ok {
		return errors.New(candidates[0].Name + ": no ready endpoint")
	}
	var client net.Conn = c
	if hr.host.Certificate != nil {
		tc, err := p.terminate(c, name, hello)
		if err != nil {
			return err
		}
		client, hello = tc, nil
	}
	up, err := p.dialer.DialContext(ctx, "tcp", target)
	if err != nil {
		return err
	}
	defer up.Close()
	if !p.track(up, true) {
		return errors.New("the port closed")
	}
	defer p.track(up, false)
	if _, err := up.Write(hello); err != nil {
		return err
	}
	splice(client, up)
	return nil
}

// terminate ends c's TLS session with the certificate of its server
// name's host, the ClientHello read (hello) first: the stream it carries
// is the backend's, in the clear.
func (p *passthrough) terminate(c net.Conn, name string, hello []byte) (*tls.Conn, error) {
	idx := p.certs.Load()
	if idx == nil {
		return nil, errors.New("no certificate")
	}
	cfg, err := idx.get(name)
	if err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	cfg.NextProtos = nil // a stream, not HTTP
	tc := tls.Server(replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), c)}, cfg)
	if err := c.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return nil, err
	}
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	return tc, c.SetDeadline(time.Time{})
}

// replayConn reads what r gives (bytes already read, then the
// connection's) and writes to the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (rc replayConn) Read(b []byte) (int, error) { return rc.r.Read(b) }

// splice copies both ways until both ends finish; each end's EOF closes
// the other's writing half, so that a half-closed stream drains.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go copyHalf(a, b)
	go copyHalf(b, a)
	wg.Wait()
}

// helloRead stops a handshake once the ClientHello is read (a type, not
// a variable: no package init).
type helloRead struct{}

func (helloRead) Error() string { return "client hello read" }

// readServerName reads c's ClientHello, and returns the server name it
// asks for ("" for none) and the bytes read, which the backend must get
// first.
func readServerName(c net.Conn) (string, []byte, error) {
	var read bytes.Buffer
	var name string
	err := tls.Server(helloConn{Conn: c, r: io.TeeReader(c, &read)}, &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			name = hello.ServerName
			return nil, helloRead{}
		},
	}).Handshake()
	if !errors.As(err, new(helloRead)) {
		return "", nil, err
	}
	return name, read.Bytes(), nil
}

// helloConn reads c through r, and writes nothing: the handshake that
// reads the ClientHello answers no one.
type helloConn struct {
	net.Conn
	r io.Reader
}

func (h helloConn) Read(b []byte) (int, error)  { return h.r.Read(b) }
func (h helloConn) Write(b []byte) (int, error) { return len(b), nil }

// shutdown stops accepting, lets the connections open finish until ctx
// is done, then closes them.
func (p *passthrough) shutdown(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	finished := make(chan struct{})
	go func() {
		p.done.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		<-finished
	}
}
