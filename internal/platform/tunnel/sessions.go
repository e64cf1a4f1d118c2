package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// ErrNoTunnel is a node whose agent has no tunnel to this server.
var ErrNoTunnel = errors.New("no tunnel from the node's agent")

// Sessions are the tunnels agents opened to this server, one per node:
// a node's newer tunnel replaces its older one (an agent that
// reconnected). The zero value has none.
type Sessions struct {
	mu    sync.Mutex
	nodes map[string]*yamux.Session
}

// Accept takes the tunnel r asks for as node's, whose agent the caller
// has authenticated: it answers the upgrade and keeps the connection.
// A request that is not an upgrade to a tunnel is answered with an
// error.
func (s *Sessions) Accept(w http.ResponseWriter, r *http.Request, node string) {
	if r.Method != http.MethodGet || r.ProtoMajor != 1 || !strings.EqualFold(r.Header.Get("Upgrade"), protocol) {
		http.Error(w, "a tunnel is a GET request over HTTP/1.1 with Upgrade: "+protocol, http.StatusBadRequest)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "the connection cannot be taken over: "+err.Error(), http.StatusInternalServerError)
		return
	}
	// The server's read and write timeouts were for the request.
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+protocol+"\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	var c net.Conn = conn
	if rw.Reader.Buffered() > 0 {
		c = bufferedConn{conn, rw.Reader}
	}
	session, err := yamux.Client(c, sessionConfig())
	if err != nil {
		conn.Close()
		return
	}
	s.mu.Lock()
	if s.nodes == nil {
		s.nodes = map[string]*yamux.Session{}
	}
	if old := s.nodes[node]; old != nil {
		old.Close()
	}
	s.nodes[node] = session
	s.mu.Unlock()
	go func() {
		<-session.CloseChan()
		s.mu.Lock()
		if s.nodes[node] == session {
			delete(s.nodes, node)
		}
		s.mu.Unlock()
	}()
}

// Nodes are the nodes with a tunnel, sorted.
func (s *Sessions) Nodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes := make([]string, 0, len(s.nodes))
	for n := range s.nodes {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes
}

// Dial connects to addr on network through node's tunnel, within ctx:
// ErrNoTunnel if node has none, ErrAgentDial (wrapped, with the
// agent's reason) if the agent did not connect.
func (s *Sessions) Dial(ctx context.Context, node, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	session := s.nodes[node]
	s.mu.Unlock()
	if session == nil {
		return nil, fmt.Errorf("%w %s", ErrNoTunnel, node)
	}
	stream, err := session.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("node %s's tunnel: %w", node, err)
	}
	// The agent answers once it has connected (or not): that wait is the
	// dial's, bounded by ctx. yamux's Close only half closes: the
	// deadline ends the wait.
	stop := context.AfterFunc(ctx, func() {
		_ = stream.SetDeadline(time.Now())
		stream.Close()
	})
	defer stop()
	if _, err := io.WriteString(stream, network+" "+addr+"\n"); err != nil {
		stream.Close()
		return nil, fmt.Errorf("node %s's tunnel: %w", node, err)
	}
	reply, err := readLine(stream)
	if err != nil {
		stream.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dialing %s through node %s's tunnel: %w", addr, node, ctx.Err())
		}
		return nil, fmt.Errorf("node %s's tunnel: %w", node, err)
	}
	if reply != "" {
		stream.Close()
		return nil, fmt.Errorf("dialing %s through node %s's tunnel: %w: %s", addr, node, ErrAgentDial, reply)
	}
	if !stop() {
		// ctx ended just as the agent connected.
		return nil, fmt.Errorf("dialing %s through node %s's tunnel: %w", addr, node, ctx.Err())
	}
	return stream, nil
}

// Close closes every tunnel.
func (s *Sessions) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, session := range s.nodes {
		session.Close()
	}
}
