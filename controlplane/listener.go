package controlplane

import (
	"net"
	"sync"
	"time"
)

// connectionCloseGrace is how long connections may stay open once the
// server has stopped listening. By then the generic server has drained
// every request and watch; what is left are idle HTTP/2 connections, which
// x/net/http2 keeps up to a second after its GOAWAY for the client to
// close. Stop would wait that second whenever a client had connected.
const connectionCloseGrace = 20 * time.Millisecond

// closingListener tracks the connections it accepts and, when it is
// closed, closes those still open after connectionCloseGrace.
type closingListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newClosingListener(l net.Listener) *closingListener {
	return &closingListener{Listener: l, conns: map[*trackedConn]struct{}{}}
}

func (l *closingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

func (l *closingListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	first := !l.closed
	l.closed = true
	l.mu.Unlock()
	if first {
		time.AfterFunc(connectionCloseGrace, l.closeConns)
	}
	return err
}

func (l *closingListener) closeConns() {
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *closingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
