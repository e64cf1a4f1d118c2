package integration

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

	"github.com/kubeboot/kubeboot/internal/etcd"
	"github.com/kubeboot/kubeboot/internal/pki"
	"github.com/kubeboot/kubeboot/test/harness"
)

// cluster is n apiserver processes sharing one embedded etcd (reached over
// its unix socket) and one CA, each bound to 198.51.100.<i+1>:6443.
type cluster struct {
	t        testing.TB
	bin      string
	etcd     *etcd.Server
	dirs     []string
	servers  []*harness.APIServer
	extraArg []string
}

func addr(i int) string { return "198.51.100." + strconv.Itoa(i+1) }

func newCluster(t testing.TB, n int, extra ...string) *cluster {
	t.Helper()
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	e, err := etcd.Start(context.Background(), etcd.Config{Dir: filepath.Join(root, "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	c := &cluster{t: t, bin: bin, etcd: e, extraArg: extra}
	for i := 0; i < n; i++ {
		c.dirs = append(c.dirs, filepath.Join(root, fmt.Sprintf("apiserver-%d", i)))
	}
	if _, err := pki.EnsureCA(filepath.Join(c.dirs[0], "pki"), "kubeboot-ca"); err != nil {
		t.Fatal(err)
	}
	if err := harness.SharePKI(c.dirs[0], c.dirs[1:]...); err != nil {
		t.Fatal(err)
	}
	c.servers = make([]*harness.APIServer, n)
	return c
}

// start starts apiserver i and waits until it is ready.
func (c *cluster) start(i int) *harness.APIServer {
	c.t.Helper()
	args := append([]string{
		"--bind-address", addr(i), "--secure-port", "6443",
		"--etcd-servers", c.etcd.Endpoints()[0],
		"--service-cluster-ip-range", "10.96.0.0/16",
	}, c.extraArg...)
	s := harness.StartAPIServer(c.t, c.bin, c.dirs[i], args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		c.t.Fatal(err)
	}
	c.servers[i] = s
	return s
}

func (c *cluster) client(i int) kubernetes.Interface {
	c.t.Helper()
	cl, err := c.servers[i].Client()
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// endpointIPs returns the addresses of the kubernetes Endpoints and checks
// that the EndpointSlice lists the same ones.
func endpointIPs(ctx context.Context, client kubernetes.Interface) ([]string, error) {
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

// waitEndpoints polls every interval until the endpoints list exactly
// want, and returns how long that took.
func waitEndpoints(t testing.TB, client kubernetes.Interface, want []string, interval, timeout time.Duration) time.Duration {
	t.Helper()
	slices.Sort(want)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last []string
	var lastErr error
	for {
		last, lastErr = endpointIPs(ctx, client)
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

func ips(idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, addr(i))
	}
	return out
}

// TestEndpointsFollowLiveAPIServers runs three apiservers on one etcd and
// checks that the kubernetes endpoints list exactly the live ones through
// SIGKILL, SIGTERM, restart and the last one's graceful stop.
func TestEndpointsFollowLiveAPIServers(t *testing.T) {
	if !harness.InNetNS(t, addr(0), addr(1), addr(2)) {
		return
	}
	c := newCluster(t, 3)
	for i := range 3 {
		c.start(i)
	}
	client := c.client(0)
	waitEndpoints(t, client, ips(0, 1, 2), 50*time.Millisecond, 15*time.Second)

	// A crashed apiserver leaves once its lease expires (3 s TTL): allow
	// generous headroom for a loaded CI machine; bench/failover measures.
	c.servers[1].Kill()
	took := waitEndpoints(t, client, ips(0, 2), 10*time.Millisecond, 15*time.Second)
	t.Logf("SIGKILLed apiserver left the endpoints after %s", took)
	if took > 8*time.Second {
		t.Errorf("a SIGKILLed apiserver stayed in the endpoints for %s", took)
	}

	// A stopping apiserver removes itself before it stops serving.
	done := make(chan error, 1)
	go func() { done <- c.servers[2].Terminate(30 * time.Second) }()
	took = waitEndpoints(t, client, ips(0), 5*time.Millisecond, 10*time.Second)
	t.Logf("SIGTERMed apiserver left the endpoints after %s", took)
	if took > 2*time.Second {
		t.Errorf("a SIGTERMed apiserver stayed in the endpoints for %s", took)
	}
	if err := <-done; err != nil {
		t.Errorf("SIGTERM: %v", err)
	}

	// A restarted apiserver rejoins.
	c.start(1)
	waitEndpoints(t, client, ips(0, 1), 50*time.Millisecond, 15*time.Second)

	// The last one out removes itself too.
	if err := c.servers[1].Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, client, ips(0), 20*time.Millisecond, 10*time.Second)
	if err := c.servers[0].Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	ep := storedEndpoints(t, c.etcd)
	if len(ep.Subsets) != 0 {
		t.Errorf("after the last apiserver stopped, the stored endpoints are %+v, want none", ep.Subsets)
	}
}
