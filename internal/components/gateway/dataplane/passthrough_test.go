package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// TestPassthrough passes TLS connections through to a backend chosen by
// the server name: the client completes its handshake with the backend's
// own certificate (the port holds none) and talks to it; a server name no
// route takes is closed, as is one whose backend has no endpoint; the
// port's shutdown closes what stays open.
func TestPassthrough(t *testing.T) {
	kp, err := pki.NewSelfSigned(pki.ServingSpec{CommonName: "abc.example.com", DNSNames: []string{"abc.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go answerLines(backend, "backend: ")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := newPassthrough(443, ln, fixedEndpoints{addr: backend.Addr().String(), none: map[string]bool{"down": true}})
	routes, errs := compile(&Port{Port: 443, Passthrough: true, Hosts: []Host{
		{Hostname: "*.example.com", Routes: []Route{{Name: "tls", Hostnames: []string{"abc.example.com"}, Backends: to("tls")}}},
		{Hostname: "down.test", Routes: []Route{{Name: "down", Backends: to("down")}}},
	}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p.routes.Store(routes)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.serve(ctx)

	roots := x509.NewCertPool()
	roots.AddCert(kp.Cert)
	dial := func(name string) (*tls.Conn, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), &tls.Config{ServerName: name, RootCAs: roots})
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		}
		return c, err
	}
	c, err := dial("abc.example.com")
	if err != nil {
		t.Fatalf("a handshake passed through to the backend: %v", err)
	}
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "backend: hello\n" {
		t.Errorf("the backend answered %q, %v", got, err)
	}
	c.Close()

	for _, name := range []string{"xyz.example.com", "other.test", "down.test"} {
		if c, err := dial(name); err == nil {
			c.Close()
			t.Errorf("server name %s: the handshake succeeded; want the connection closed", name)
		}
	}

	// A connection open at shutdown is closed once the drain ends.
	open, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	drain, cancelDrain := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelDrain()
	done := make(chan struct{})
	go func() {
		p.shutdown(drain)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown did not close an idle connection")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("the port still accepts after shutdown")
	}
}

// TestTerminate: a TLS port's host with a certificate (a listener of
// mode Terminate) ends the client's session with it and passes the
// stream to the backend in the clear.
func TestTerminate(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go answerLines(backend, "plain: ")
	kp, err := pki.NewSelfSigned(pki.ServingSpec{CommonName: "tls.example.com", DNSNames: []string{"tls.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := &Port{Port: 8443, Passthrough: true, Hosts: []Host{
		{Hostname: "tls.example.com", Certificate: &Certificate{Cert: kp.CertPEM, Key: kp.KeyPEM}, Routes: []Route{{Name: "t", Backends: to("plain")}}}}}
	p := newPassthrough(8443, ln, fixedEndpoints{addr: backend.Addr().String()})
	routes, errs := compile(port)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p.routes.Store(routes)
	p.certs.Store(indexCertificates(t.Context(), port))
	go p.serve(t.Context())
	defer p.shutdown(t.Context())

	roots := x509.NewCertPool()
	roots.AddCert(kp.Cert)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), &tls.Config{ServerName: "tls.example.com", RootCAs: roots})
	if err != nil {
		t.Fatalf("the handshake with the port's certificate: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "plain: hello\n" {
		t.Errorf("the backend answered %q, %v; want the stream in the clear", got, err)
	}
}

// answerLines answers the first line of each connection ln accepts with
// prefix and the line, until ln closes.
func answerLines(ln net.Listener, prefix string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = c.Write([]byte(prefix + line))
		}()
	}
}
