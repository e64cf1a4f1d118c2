package tunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// echo listens on 127.0.0.1 and answers each connection with what it
// read, once the client has closed its side.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				data, _ := io.ReadAll(c)
				_, _ = c.Write(append([]byte("echo: "), data...))
			}()
		}
	}()
	return l.Addr().String()
}

// agentFor starts a server taking tunnels as node and an agent serving
// one with allow; it returns the server's sessions once the tunnel is up.
func agentFor(t *testing.T, node string, allow func(network, addr string) error) (*Sessions, *httptest.Server) {
	t.Helper()
	sessions := &Sessions{}
	t.Cleanup(sessions.Close)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path {
			http.NotFound(w, r)
			return
		}
		sessions.Accept(w, r, node)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	connect(t, ctx, srv, allow)
	waitNodes(t, sessions, node)
	return sessions, srv
}

func connect(t *testing.T, ctx context.Context, srv *httptest.Server, allow func(network, addr string) error) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	conn, err := Connect(ctx, srv.Listener.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = Serve(ctx, conn, allow) }()
}

func waitNodes(t *testing.T, s *Sessions, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for fmt.Sprint(s.Nodes()) != fmt.Sprint(want) {
		if time.Now().After(deadline) {
			t.Fatalf("nodes with a tunnel: %v, want %v", s.Nodes(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func allowAll(string, string) error { return nil }

func TestDial(t *testing.T) {
	target := echo(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := closed.Addr().String()
	closed.Close()
	sessions, _ := agentFor(t, "node-a", func(network, addr string) error {
		if strings.HasPrefix(addr, "192.0.2.") {
			return errors.New("192.0.2.0/24 is not this node's")
		}
		return nil
	})

	tests := []struct {
		name, node, addr string
		wantErr          error
		wantText         string
	}{
		{name: "connects, both ways, half closes", node: "node-a", addr: target},
		{name: "an address the agent refuses", node: "node-a", addr: "192.0.2.1:80", wantErr: ErrAgentDial, wantText: "not this node's"},
		{name: "an address that does not answer", node: "node-a", addr: refusedAddr, wantErr: ErrAgentDial, wantText: "connection refused"},
		{name: "a node without a tunnel", node: "node-b", addr: target, wantErr: ErrNoTunnel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := sessions.Dial(ctx, tc.node, "tcp", tc.addr)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
					t.Fatalf("Dial: %v, want %v (%q)", err, tc.wantErr, tc.wantText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "hello"); err != nil {
				t.Fatal(err)
			}
			// The echo answers only once it has read to the end: the
			// half close must reach it through the tunnel.
			if err := conn.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(conn)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "echo: hello" {
				t.Fatalf("read %q", got)
			}
		})
	}
}

func TestDialContext(t *testing.T) {
	// An agent that never answers: its allow blocks until the test ends.
	release := make(chan struct{})
	defer close(release)
	sessions, _ := agentFor(t, "node-a", func(string, string) error { <-release; return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := sessions.Dial(ctx, "node-a", "tcp", "127.0.0.1:1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial: %v, want the context's deadline", err)
	}
}

func TestReconnect(t *testing.T) {
	target := echo(t)
	sessions, srv := agentFor(t, "node-a", allowAll)
	// The agent reconnects (its first connection is gone from its side):
	// the newer tunnel serves, the older is closed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect(t, ctx, srv, allowAll)
	time.Sleep(100 * time.Millisecond)
	waitNodes(t, sessions, "node-a")
	conn, err := sessions.Dial(ctx, "node-a", "tcp", target)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	// The agent goes: the node has no tunnel.
	cancel()
	waitNodes(t, sessions)
}

func TestAcceptRefusesOtherRequests(t *testing.T) {
	sessions := &Sessions{}
	rec := httptest.NewRecorder()
	sessions.Accept(rec, httptest.NewRequest(http.MethodPost, Path, nil), "node-a")
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("a POST: %d, want 400", rec.Code)
	}
	if len(sessions.Nodes()) != 0 {
		t.Fatalf("nodes: %v", sessions.Nodes())
	}
}

func TestConnectRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not an agent", http.StatusForbidden)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	_, err := Connect(context.Background(), srv.Listener.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "example.com"})
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "not an agent") {
		t.Fatalf("Connect: %v, want the server's 403 and reason", err)
	}
}
