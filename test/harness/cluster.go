package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// Addr is the address of apiserver i of a Cluster in its network
// namespace: 198.51.100.<i+1>.
func Addr(i int) string { return "198.51.100." + strconv.Itoa(i+1) }

// Addrs lists Addr(i) for each i.
func Addrs(idx ...int) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, Addr(i))
	}
	return out
}

// Cluster is n apiserver processes sharing one CA and one etcd, each bound
// to Addr(i):6443 (so it must run inside InNetNS with those addresses).
type Cluster struct {
	// Command is the kubeboot command each process runs: apiserver (the
	// default) or server.
	Command string

	t       testing.TB
	bin     string
	etcdURL []string
	dirs    []string
	args    []string
	servers []*APIServer
	// Etcd is the embedded etcd the cluster runs on, when the cluster
	// started its own.
	Etcd *etcd.Server
}

// NewCluster prepares n apiservers on a fresh embedded etcd (reached over
// its unix socket); extra flags are added to every apiserver.
func NewCluster(t testing.TB, n int, extra ...string) *Cluster {
	t.Helper()
	root := t.TempDir()
	e, err := etcd.Start(context.Background(), etcd.Config{Dir: filepath.Join(root, "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	c := NewClusterOn(t, n, e.Endpoints(), extra...)
	c.Etcd = e
	return c
}

// NewClusterOn prepares n apiservers on the etcd at endpoints; extra flags
// (e.g. --etcd-cafile) are added to every apiserver.
func NewClusterOn(t testing.TB, n int, endpoints []string, extra ...string) *Cluster {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	c := &Cluster{Command: "apiserver", t: t, bin: bin, etcdURL: endpoints, args: extra, servers: make([]*APIServer, n)}
	for i := 0; i < n; i++ {
		c.dirs = append(c.dirs, filepath.Join(root, fmt.Sprintf("apiserver-%d", i)))
	}
	if _, err := pki.EnsureCA(filepath.Join(c.dirs[0], "pki"), "kubeboot-ca"); err != nil {
		t.Fatal(err)
	}
	if err := SharePKI(c.dirs[0], c.dirs[1:]...); err != nil {
		t.Fatal(err)
	}
	return c
}

// Start starts apiserver i and waits until it is ready.
func (c *Cluster) Start(i int) *APIServer {
	c.t.Helper()
	args := append([]string{
		"--bind-address", Addr(i), "--secure-port", "6443",
		"--etcd-servers", joinComma(c.etcdURL),
		"--service-cluster-ip-range", "10.96.0.0/16",
	}, c.args...)
	s := StartReady(c.t, time.Minute, c.bin, c.Command, c.dirs[i], args...)
	c.servers[i] = s
	return s
}

// Server returns apiserver i (nil if never started).
func (c *Cluster) Server(i int) *APIServer { return c.servers[i] }

// Client returns an admin client of apiserver i.
func (c *Cluster) Client(i int) kubernetes.Interface {
	c.t.Helper()
	cl, err := c.servers[i].Client()
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}

// EndpointIPs returns the addresses of the kubernetes Endpoints, and an
// error if the EndpointSlice lists different ones.
func EndpointIPs(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	ep, err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, s := range ep.Subsets {
		for _, a := range s.Addresses {
			ips = append(ips, a.IP)
		}
	}
	slice, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var sliceIPs []string
	for _, e := range slice.Endpoints {
		sliceIPs = append(sliceIPs, e.Addresses...)
	}
	slices.Sort(ips)
	slices.Sort(sliceIPs)
	if !slices.Equal(ips, sliceIPs) {
		return ips, fmt.Errorf("endpoints %v and endpointslice %v differ", ips, sliceIPs)
	}
	return ips, nil
}

// WaitEndpoints polls every interval until the kubernetes endpoints list
// exactly want, and returns how long that took.
func WaitEndpoints(t testing.TB, client kubernetes.Interface, want []string, interval, timeout time.Duration) time.Duration {
	t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last []string
	var lastErr error
	for {
		last, lastErr = EndpointIPs(ctx, client)
		if lastErr == nil && slices.Equal(last, want) {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("endpoints are %v (err %v), want %v after %s", last, lastErr, want, timeout)
		case <-time.After(interval):
		}
	}
}
