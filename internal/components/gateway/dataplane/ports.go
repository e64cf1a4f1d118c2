package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// acceptRetry is the pause after a failed accept (out of descriptors).
const acceptRetry = 100 * time.Millisecond

// servers are the node's ports: a socket for each port number, on every
// address of the host, which hands each connection to the entry of its
// destination address: a Gateway's own, else the nodes' own addresses'.
type servers struct {
	node      Node
	endpoints Endpoints
	transport *transport
	sockets   map[int32]*socket
}

// socket is a port number listened on.
type socket struct {
	port int32
	ln   net.Listener

	mu      sync.RWMutex
	entries map[netip.Addr]*entry // the invalid address: the nodes' own
	// pool is the Gateways' own addresses' range: a connection to one
	// without an entry of its port is closed, not served as the nodes'.
	pool *AddressRange
}

// entry serves the connections of one address of a port: with an HTTP
// server, or passed through.
type entry struct {
	tls, passthrough bool
	conns            *connQueue
	handler          *handler
	srv              *http.Server
	certs            sync.Map // "certs" -> *certIndex
	tcp              *passthrough
}

// apply makes the node serve cfg: a port listens once, each of its
// entries' routes swapped whole; what cfg no longer has finishes its
// requests and closes. It reports whether every port listens.
func (s *servers) apply(ctx context.Context, cfg *Config) (listening bool) {
	logger := klog.FromContext(ctx)
	want := map[int32]map[netip.Addr]*Port{}
	for i := range cfg.Ports {
		p := &cfg.Ports[i]
		if want[p.Port] == nil {
			want[p.Port] = map[netip.Addr]*Port{}
		}
		want[p.Port][p.Address] = p
	}
	listening = true
	for port, ports := range want {
		sock := s.sockets[port]
		if sock == nil {
			var err error
			if sock, err = s.listen(ctx, port); err != nil {
				logger.Error(err, "The node cannot serve a port of its Gateways or Ingresses; tried again", "port", port)
				listening = false
				continue
			}
			s.sockets[port] = sock
		}
		sock.update(ctx, s, ports, cfg.Pool)
	}
	s.transport.tls.sweep()
	for port, sock := range s.sockets {
		if want[port] == nil {
			delete(s.sockets, port)
			sock.close()
		}
	}
	return listening
}

// listen opens port on every address of the host (or the node's).
func (s *servers) listen(ctx context.Context, port int32) (*socket, error) {
	addr := ""
	if s.node.Address.IsValid() {
		addr = s.node.Address.String()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(int(port))))
	if err != nil {
		return nil, err
	}
	sock := &socket{port: port, ln: ln, entries: map[netip.Addr]*entry{}}
	go sock.serve(ctx)
	return sock, nil
}

// update makes the socket's entries ports', each its routes and
// certificates.
func (sock *socket) update(ctx context.Context, s *servers, ports map[netip.Addr]*Port, pool *AddressRange) {
	logger := klog.FromContext(ctx)
	sock.mu.Lock()
	defer sock.mu.Unlock()
	sock.pool = pool
	for addr, e := range sock.entries {
		if p := ports[addr]; p == nil || p.TLS != e.tls || p.Passthrough != e.passthrough {
			delete(sock.entries, addr)
			e.close()
		}
	}
	for addr, p := range ports {
		e := sock.entries[addr]
		if e == nil {
			e = s.newEntry(ctx, sock, p)
			sock.entries[addr] = e
		}
		s.transport.tls.bind(p)
		routes, errs := compile(p)
		for _, err := range errs {
			logger.Error(err, "A route left out", "port", p.Port, "address", p.served())
		}
		if p.Passthrough {
			e.tcp.routes.Store(routes)
			e.tcp.certs.Store(indexCertificates(ctx, p))
			continue
		}
		e.handler.routes.Store(routes)
		if p.TLS {
			e.certs.Store("certs", indexCertificates(ctx, p))
		}
	}
}

// serve hands each connection to its destination address's entry.
func (sock *socket) serve(ctx context.Context) {
	for {
		c, err := sock.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Accepting a connection failed", "port", sock.port)
			time.Sleep(acceptRetry)
			continue
		}
		if e := sock.entryOf(c); e != nil {
			e.conns.push(c)
		} else {
			c.Close()
		}
	}
}

// entryOf is the entry that serves c: its destination address's, else
// the nodes' own addresses' unless the address is a Gateway's.
func (sock *socket) entryOf(c net.Conn) *entry {
	var dst netip.Addr
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		dst = a.AddrPort().Addr().Unmap()
	}
	sock.mu.RLock()
	defer sock.mu.RUnlock()
	if e, ok := sock.entries[dst]; ok {
		return e
	}
	if sock.pool != nil && sock.pool.Contains(dst) {
		return nil
	}
	return sock.entries[netip.Addr{}]
}

// close stops listening; each entry finishes its requests and closes.
func (sock *socket) close() {
	_ = sock.ln.Close()
	sock.mu.Lock()
	defer sock.mu.Unlock()
	for addr, e := range sock.entries {
		delete(sock.entries, addr)
		e.close()
	}
}

func (s *servers) closeAll() {
	for port, sock := range s.sockets {
		delete(s.sockets, port)
		sock.close()
	}
}

// newEntry starts serving p's connections, which sock hands it.
func (s *servers) newEntry(ctx context.Context, sock *socket, p *Port) *entry {
	logger := klog.FromContext(ctx)
	conns := newConnQueue(sock.ln.Addr())
	if p.Passthrough {
		e := &entry{passthrough: true, conns: conns, tcp: newPassthrough(p.Port, conns, s.endpoints)}
		go e.tcp.serve(ctx)
		logger.Info("Passing TLS through on a port of the cluster's Gateways", "port", p.Port, "address", p.served())
		return e
	}
	e := &entry{tls: p.TLS, conns: conns, handler: newHandler(p.Port, p.TLS, s.endpoints, s.transport)}
	e.srv = &http.Server{
		Handler:           e.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(klogWriter{logger}, "", 0),
	}
	// HTTP/2 beside HTTP/1.1: by ALPN on a TLS port, with prior
	// knowledge in the clear (h2c, as gRPC clients speak it) on the others.
	e.srv.Protocols = &http.Protocols{}
	e.srv.Protocols.SetHTTP1(true)
	e.srv.Protocols.SetUnencryptedHTTP2(!p.TLS)
	if p.TLS {
		e.srv.Protocols.SetHTTP2(true)
		// Each host has its own configuration: its certificate, and its
		// check of the clients' (a Gateway's tls.frontend).
		e.srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			idx, _ := e.certs.Load("certs")
			if idx == nil {
				return nil, errors.New("no certificate")
			}
			return idx.(*certIndex).get(hello.ServerName)
		}}
	}
	go func() {
		var err error
		if p.TLS {
			err = e.srv.ServeTLS(conns, "", "")
		} else {
			err = e.srv.Serve(conns)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Serving a port stopped", "port", p.Port, "address", p.served())
		}
	}()
	logger.Info("Serving a port of the cluster's Gateways and Ingresses", "port", p.Port, "address", p.served(), "tls", p.TLS)
	return e
}

// close stops the entry: its requests in flight finish first.
func (e *entry) close() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if e.tcp != nil {
			e.tcp.shutdown(ctx)
			return
		}
		_ = e.srv.Shutdown(ctx)
	}()
}

// connQueue is a listener of the connections a socket hands an entry.
type connQueue struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to the entry, or closes it if the entry closed.
func (q *connQueue) push(c net.Conn) {
	select {
	case q.conns <- c:
	case <-q.done:
		c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// served names the addresses p serves, for logs.
func (p *Port) served() string {
	if p.Address.IsValid() {
		return p.Address.String()
	}
	return "the node's own"
}
