package controlplane

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestClosingListener: once closed, the listener closes the connections
// it accepted that are still open, after the grace; a connection closed
// earlier is forgotten.
func TestClosingListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newClosingListener(inner)
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	first, second := <-accepted, <-accepted
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	open := len(l.conns)
	l.mu.Unlock()
	if open != 1 {
		t.Errorf("%d connections tracked after one closed, want 1", open)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The server side of the second connection is closed for it: the
	// client reads EOF.
	for _, c := range clients {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("client read after the listener closed: %v, want EOF", err)
		}
	}
	if _, err := second.Write([]byte("x")); err == nil {
		t.Error("the server side of a tracked connection still writes after the grace")
	}
}
