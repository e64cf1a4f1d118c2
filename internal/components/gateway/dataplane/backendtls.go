package dataplane

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// tlsTransports are the transports of the backends spoken to over TLS:
// one for each BackendTLS and protocol, by content, so that a Config
// applied again keeps its backends' connections.
type tlsTransports struct {
	mu    sync.Mutex
	epoch uint64
	byKey map[string]*tlsTransport
}

type tlsTransport struct {
	rt    *http.Transport
	err   error // why the BackendTLS makes no transport
	epoch uint64
}

// bind gives each TLS backend of p's routes (and their mirrors) its
// transport.
func (t *tlsTransports) bind(p *Port) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range p.Hosts {
		for j := range p.Hosts[i].Routes {
			r := &p.Hosts[i].Routes[j]
			for k := range r.Backends {
				t.bindBackend(&r.Backends[k])
			}
			for k := range r.Mirrors {
				t.bindBackend(&r.Mirrors[k].Backend)
			}
		}
	}
}

func (t *tlsTransports) bindBackend(b *Backend) {
	if b.TLS == nil {
		return
	}
	h2 := b.Protocol == ProtocolH2C
	raw, _ := json.Marshal(b.TLS)
	sum := sha256.Sum256(raw)
	key := fmt.Sprintf("%x/%t", sum, h2)
	tt, ok := t.byKey[key]
	if !ok {
		tt = &tlsTransport{}
		tt.rt, tt.err = newTLSTransport(b.TLS, h2)
		if t.byKey == nil {
			t.byKey = map[string]*tlsTransport{}
		}
		t.byKey[key] = tt
	}
	tt.epoch = t.epoch
	b.TLS.rt, b.TLS.err = nil, tt.err
	if tt.rt != nil { // not a nil *http.Transport in the interface
		b.TLS.rt = tt.rt
	}
}

// sweep closes the idle connections of the transports the last Config
// applied no longer binds, and forgets them; requests in flight on them
// finish. It starts the next Config's binding.
func (t *tlsTransports) sweep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, tt := range t.byKey {
		if tt.epoch != t.epoch {
			if tt.rt != nil {
				tt.rt.CloseIdleConnections()
			}
			delete(t.byKey, key)
		}
	}
	t.epoch++
}

// newTLSTransport connects over TLS as bt says: HTTP/2 by ALPN when h2
// (a backend of gRPC's), else HTTP/1.1.
func newTLSTransport(bt *BackendTLS, h2 bool) (*http.Transport, error) {
	cfg := &tls.Config{ServerName: bt.ServerName, MinVersion: tls.VersionTLS12}
	if len(bt.CACerts) > 0 {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(bt.CACerts) {
			return nil, errors.New("the backend's CA certificates hold no certificate")
		}
	}
	if c := bt.ClientCertificate; c != nil {
		pair, err := tls.X509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if len(bt.SubjectAltNames) > 0 {
		// The chain is checked here, and the certificate's names against
		// SubjectAltNames, not ServerName (which only chooses it).
		roots, sans := cfg.RootCAs, bt.SubjectAltNames
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyPeer(cs, roots, sans) }
	}
	p := &http.Protocols{}
	p.SetHTTP1(!h2)
	p.SetHTTP2(h2)
	rt := baseTransport(p)
	rt.TLSClientConfig = cfg
	return rt, nil
}

// verifyPeer checks that the backend's certificate chains to roots (the
// system's when nil) and has one of sans.
func verifyPeer(cs tls.ConnectionState, roots *x509.CertPool, sans []SubjectAltName) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the backend presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return err
	}
	for _, san := range sans {
		if san.Hostname != "" && leaf.VerifyHostname(san.Hostname) == nil {
			return nil
		}
		for _, u := range leaf.URIs {
			if san.URI != "" && u.String() == san.URI {
				return nil
			}
		}
	}
	return fmt.Errorf("the backend's certificate has none of the subject alternative names its BackendTLSPolicy names (%d)", len(sans))
}
