package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// webHandler answers what a Gateway's backends are asked, each answer
// naming host: an HTTP request with "hello from <host>"; a WebSocket's
// messages with "<host>: <message>"; gRPC (HTTP/2) with the health
// service, whose service <host> is SERVING (and no other).
func webHandler(host string) http.Handler {
	grpcServer := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(host, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(grpcServer, hs)
	upgrader := websocket.Upgrader{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc"):
			grpcServer.ServeHTTP(w, r)
		case websocket.IsWebSocketUpgrade(r):
			c, err := upgrader.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				kind, msg, err := c.ReadMessage()
				if err != nil {
					return
				}
				if err := c.WriteMessage(kind, []byte(host+": "+string(msg))); err != nil {
					return
				}
			}
		default:
			fmt.Fprintln(w, "hello from "+host)
		}
	})
}

// serveWeb serves webHandler on port: HTTP/1.1 and HTTP/2 in the clear
// (h2c, as gRPC clients and a Gateway speak it to GRPCRoutes' backends),
// or, with tlsToo, over TLS with a certificate made now for the host
// (its common name), which shows a client whose certificate it got.
func serveWeb(port string, withTLS bool) error {
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: ":" + port, Handler: webHandler(host), ReadHeaderTimeout: 30 * time.Second, Protocols: &http.Protocols{}}
	srv.Protocols.SetHTTP1(true)
	if !withTLS {
		srv.Protocols.SetUnencryptedHTTP2(true)
		fmt.Println("serving HTTP on :" + port)
		return srv.ListenAndServe()
	}
	srv.Protocols.SetHTTP2(true)
	cert, err := selfSigned(host)
	if err != nil {
		return err
	}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	fmt.Println("serving HTTPS on :" + port)
	return srv.ListenAndServeTLS("", "")
}

// selfSigned is a certificate for host, its common name and DNS name,
// that signs itself.
func selfSigned(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
