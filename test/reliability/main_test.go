package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// addrs are every address the tests use: apiservers and etcd members.
func addrs() []string {
	return append(harness.Addrs(0, 1, 2), harness.EtcdAddr(0), harness.EtcdAddr(1), harness.EtcdAddr(2))
}

// setUp starts a three-member etcd cluster and three apiservers on it.
func setUp(t *testing.T, extra ...string) (*harness.EtcdCluster, *harness.Cluster) {
	t.Helper()
	e := harness.NewEtcdCluster(t, 3)
	args := append(e.Args(), "--service-ip-repair-interval", "1s")
	c := harness.NewClusterOn(t, 3, e.Endpoints(), append(args, extra...)...)
	for i := range 3 {
		c.Start(i)
	}
	harness.WaitEndpoints(t, c.Client(0), harness.Addrs(0, 1, 2), 50*time.Millisecond, 30*time.Second)
	return e, c
}

// eventually polls cond every 100 ms until it returns nil or timeout.
func eventually(t *testing.T, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	for {
		if err = cond(ctx); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not true after %s: %v", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
