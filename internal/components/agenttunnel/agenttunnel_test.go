package agenttunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/tunnel"
)

func TestHolds(t *testing.T) {
	node := &corev1.Node{
		Spec: corev1.NodeSpec{PodCIDRs: []string{"10.42.1.0/24", "fd00:42:1::/64"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "198.51.100.2"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
			{Type: corev1.NodeHostName, Address: "10.0.0.9"},
		}},
	}
	tests := []struct {
		ip   string
		want bool
	}{
		{"10.42.1.7", true},
		{"fd00:42:1::5", true},
		{"10.42.2.7", false},
		{"198.51.100.2", true},
		{"203.0.113.7", true},
		// A host name that happens to parse as an IP is not an address.
		{"10.0.0.9", false},
		{"198.51.100.3", false},
	}
	for _, tc := range tests {
		if got := holds(node, netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("holds(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
}

// TestServeHTTPAuthenticates opens tunnels to the component's endpoint
// with each kind of client certificate: only a node agent's, signed by
// the cluster CA, gets one, as its node's.
func TestServeHTTPAuthenticates(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.EnsureNamedCA(dir, "other", "another cluster")
	if err != nil {
		t.Fatal(err)
	}
	c := New()
	if _, err := c.Complete(controlplane.Settings{CAFile: filepath.Join(dir, pki.CAName+".crt")}); err != nil {
		t.Fatal(err)
	}
	serving, err := pki.NewServing(ca, pki.ServingSpec{CommonName: "server", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(c)
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert,
		Certificates: []tls.Certificate{{Certificate: [][]byte{serving.Cert.Raw}, PrivateKey: serving.Key}}}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)

	client := func(ca *pki.KeyPair, user string, groups ...string) *pki.KeyPair {
		kp, err := pki.NewClient(ca, user, groups)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	tests := []struct {
		name     string
		cert     *pki.KeyPair
		wantNode string
		wantErr  string
	}{
		{name: "a node's agent", cert: client(ca, nodejoin.AgentUser("node-b"), nodejoin.AgentsGroup), wantNode: "node-b"},
		{name: "no certificate", wantErr: "401"},
		{name: "another CA's agent", cert: client(other, nodejoin.AgentUser("node-b"), nodejoin.AgentsGroup), wantErr: "401"},
		{name: "the agent's name without its group", cert: client(ca, nodejoin.AgentUser("node-c")), wantErr: "403"},
		{name: "a kubelet", cert: client(ca, "system:node:node-d", "system:nodes"), wantErr: "403"},
		{name: "an admin", cert: client(ca, "kubernetes-admin", "system:masters"), wantErr: "403"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config := &tls.Config{RootCAs: roots}
			if tc.cert != nil {
				config.Certificates = []tls.Certificate{{Certificate: [][]byte{tc.cert.Cert.Raw}, PrivateKey: tc.cert.Key}}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			conn, err := tunnel.Connect(ctx, srv.Listener.Addr().String(), config)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Connect: %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The server keeps the tunnel just after answering.
			deadline := time.Now().Add(5 * time.Second)
			for got := c.sessions.Nodes(); len(got) != 1 || got[0] != tc.wantNode; got = c.sessions.Nodes() {
				if time.Now().After(deadline) {
					t.Fatalf("nodes with a tunnel: %v, want %s", got, tc.wantNode)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
