// Package tunnel carries the server's connections to a node's Pods and
// kubelet over a connection the node's agent opened to the server, k3s's
// agent tunnel: a server that is not on the pod network (no node of its
// own, or nodes behind NAT) still reaches webhooks, aggregated API
// servers and the proxy subresources. The agent dials the server's port
// with its client certificate and upgrades an HTTP/1.1 request at Path to
// a yamux session; the server opens a stream per connection, naming the
// address, and the agent dials it on its host and copies both ways.
//
// A stream starts with one line from the server, "<network> <address>",
// and one line back from the agent: empty once it has connected, else
// why not. Then the stream is the connection.
package tunnel

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/yamux"
)

const (
	// Path is where a server takes tunnels, on its secure port.
	Path = "/v1-kubeboot/tunnel"
	// protocol is the Upgrade header's value.
	protocol = "kubeboot-tunnel"
	// maxLine bounds a stream's first line either way.
	maxLine = 512
	// dialTimeout bounds the agent's dial of an address, as a direct dial
	// from the server would be bounded by its caller.
	dialTimeout = 10 * time.Second
)

// sessionConfig is yamux's, with keep-alives that notice a gone peer
// within a minute and no logging of its own.
func sessionConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.KeepAliveInterval = 15 * time.Second
	c.LogOutput = io.Discard
	return c
}

// ErrAgentDial is a connection the node's agent did not make: it does
// not dial that address for the server, or the address did not answer.
var ErrAgentDial = errors.New("the node's agent did not connect")

// Connect opens a tunnel to the server at addr (host:port) and returns
// its connection, ready for Serve. tlsConfig verifies the server and
// presents the agent's client certificate.
func Connect(ctx context.Context, addr string, tlsConfig *tls.Config) (net.Conn, error) {
	c := tlsConfig.Clone()
	// Upgrades are HTTP/1.1's.
	c.NextProtos = []string{"http/1.1"}
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		c.ServerName = host
	}
	conn, err := (&tls.Dialer{NetDialer: &net.Dialer{Timeout: dialTimeout}, Config: c}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// The server answers the upgrade at once; a stuck one is given up.
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+Path, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxLine))
		resp.Body.Close()
		conn.Close()
		return nil, fmt.Errorf("the server refused the tunnel: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	_ = conn.SetDeadline(time.Time{})
	return bufferedConn{conn, br}, nil
}

// Serve answers the server's streams on conn until the session ends or
// ctx is done: each stream's address is dialed on this host if allow
// accepts it (an error says why not).
func Serve(ctx context.Context, conn net.Conn, allow func(network, addr string) error) error {
	session, err := yamux.Server(conn, sessionConfig())
	if err != nil {
		conn.Close()
		return err
	}
	defer session.Close()
	stop := context.AfterFunc(ctx, func() { session.Close() })
	defer stop()
	for {
		stream, err := session.AcceptStreamWithContext(ctx)
		if err != nil {
			if ctx.Err() != nil || session.IsClosed() {
				return nil
			}
			return err
		}
		go serveStream(ctx, stream, allow)
	}
}

// serveStream dials the address stream names and copies both ways.
func serveStream(ctx context.Context, stream *yamux.Stream, allow func(network, addr string) error) {
	defer stream.Close()
	_ = stream.SetReadDeadline(time.Now().Add(dialTimeout))
	line, err := readLine(stream)
	if err != nil {
		return
	}
	_ = stream.SetReadDeadline(time.Time{})
	network, addr, ok := strings.Cut(line, " ")
	if !ok || (network != "tcp" && network != "tcp4" && network != "tcp6") {
		_, _ = io.WriteString(stream, fmt.Sprintf("cannot dial %q\n", line))
		return
	}
	if err := allow(network, addr); err != nil {
		_, _ = io.WriteString(stream, oneLine(err)+"\n")
		return
	}
	target, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, network, addr)
	if err != nil {
		_, _ = io.WriteString(stream, oneLine(err)+"\n")
		return
	}
	defer target.Close()
	if _, err := io.WriteString(stream, "\n"); err != nil {
		return
	}
	splice(stream, target.(*net.TCPConn))
}

// splice copies both ways until both directions end, passing each end of
// input on as a half close.
func splice(stream *yamux.Stream, target *net.TCPConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(target, stream)
		_ = target.CloseWrite()
	}()
	_, _ = io.Copy(stream, target)
	// yamux's Close is a half close: the server may still send.
	_ = stream.Close()
	<-done
}

// oneLine is err's text on one line.
func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if s == "" {
		s = "error"
	}
	return s
}

// readLine reads up to a newline, byte by byte, so that nothing after it
// is taken from r.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for b.Len() <= maxLine {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		if buf[0] == '\n' {
			return b.String(), nil
		}
		b.WriteByte(buf[0])
	}
	return "", errors.New("line too long")
}

// bufferedConn is a connection whose first bytes a reader may have taken.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
