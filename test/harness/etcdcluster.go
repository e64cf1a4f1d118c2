package harness

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// EtcdAddr is the address of etcd member i of an EtcdCluster in its
// network namespace: 198.51.100.<11+i>.
func EtcdAddr(i int) string { return fmt.Sprintf("198.51.100.%d", 11+i) }

// EtcdCluster is a multi-member etcd cluster run in the test process, with
// TLS on its client URLs (https://EtcdAddr(i):2379, client certificates
// required) and plain peer traffic (198.51.100.x:2380) inside the network
// namespace. Members can be stopped and started again to test quorum.
type EtcdCluster struct {
	t       testing.TB
	dirs    []string
	members []*etcd.Server
	initial string
	// CAFile, CertFile and KeyFile are what an apiserver passes as
	// --etcd-cafile, --etcd-certfile and --etcd-keyfile.
	CAFile, CertFile, KeyFile string
	serverTLS                 []etcd.TLSFiles
}

// NewEtcdCluster starts an n-member cluster and waits until it serves.
func NewEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	root := t.TempDir()
	pkiDir := filepath.Join(root, "pki")
	ca, err := pki.EnsureCA(pkiDir, "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	client, err := pki.EnsureClient(pkiDir, "apiserver-etcd-client", ca, "kube-apiserver-etcd-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = client
	c := &EtcdCluster{
		t:        t,
		CAFile:   filepath.Join(pkiDir, "ca.crt"),
		CertFile: filepath.Join(pkiDir, "apiserver-etcd-client.crt"),
		KeyFile:  filepath.Join(pkiDir, "apiserver-etcd-client.key"),
		members:  make([]*etcd.Server, n),
	}
	var peers []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("member-%d", i)
		if _, err := pki.EnsureServing(pkiDir, name, ca, pki.ServingSpec{CommonName: name, IPs: []net.IP{net.ParseIP(EtcdAddr(i))}}); err != nil {
			t.Fatal(err)
		}
		c.serverTLS = append(c.serverTLS, etcd.TLSFiles{
			CertFile:       filepath.Join(pkiDir, name+".crt"),
			KeyFile:        filepath.Join(pkiDir, name+".key"),
			TrustedCAFile:  c.CAFile,
			ClientCertAuth: true,
		})
		c.dirs = append(c.dirs, filepath.Join(root, name))
		peers = append(peers, fmt.Sprintf("%s=http://%s:2380", name, EtcdAddr(i)))
	}
	c.initial = strings.Join(peers, ",")
	// Members of a new cluster wait for each other: start them together.
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errs <- c.start(i) }()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.Stop(i)
		}
	})
	return c
}

func (c *EtcdCluster) start(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := etcd.Start(ctx, etcd.Config{
		Dir:            c.dirs[i],
		Name:           fmt.Sprintf("member-%d", i),
		ClientURLs:     []string{"https://" + EtcdAddr(i) + ":2379"},
		PeerURLs:       []string{"http://" + EtcdAddr(i) + ":2380"},
		InitialCluster: c.initial,
		ClientTLS:      c.serverTLS[i],
	})
	if err != nil {
		return fmt.Errorf("etcd member %d: %w", i, err)
	}
	c.members[i] = m
	return nil
}

// Start restarts a stopped member and waits until it serves (which needs
// a quorum of members up).
func (c *EtcdCluster) Start(i int) {
	c.t.Helper()
	if err := c.start(i); err != nil {
		c.t.Fatal(err)
	}
}

// StartAsync restarts a stopped member without waiting: when quorum is
// lost, a member serves only once enough others are back.
func (c *EtcdCluster) StartAsync(i int) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- c.start(i) }()
	return errc
}

// Stop stops member i (no-op if stopped).
func (c *EtcdCluster) Stop(i int) {
	if c.members[i] != nil {
		_ = c.members[i].Close()
		c.members[i] = nil
	}
}

// Client returns the in-process client of a running member.
func (c *EtcdCluster) Client() *clientv3.Client {
	for _, m := range c.members {
		if m != nil {
			return m.Client()
		}
	}
	c.t.Fatal("no etcd member is running")
	return nil
}

// Endpoints are the client URLs of every member, for --etcd-servers.
func (c *EtcdCluster) Endpoints() []string {
	var out []string
	for i := range c.dirs {
		out = append(out, "https://"+EtcdAddr(i)+":2379")
	}
	return out
}

// Args are the apiserver flags that point at this cluster.
func (c *EtcdCluster) Args() []string {
	return []string{"--etcd-cafile", c.CAFile, "--etcd-certfile", c.CertFile, "--etcd-keyfile", c.KeyFile}
}
