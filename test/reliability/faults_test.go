package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/test/harness"
)

func clients(c *harness.Cluster) []kubernetes.Interface {
	return []kubernetes.Interface{c.Client(0), c.Client(1), c.Client(2)}
}

// settled checks all allocations against the Services once the repair
// loops have freed every leak.
func settled(t *testing.T, client kubernetes.Interface, e *harness.EtcdCluster) {
	t.Helper()
	harness.CheckAllocations(t, client, e.Client())
}

// TestKillAPIServerUnderLoad kills one apiserver with SIGKILL while
// Services are being created and deleted through all three.
func TestKillAPIServerUnderLoad(t *testing.T) {
	if !harness.InNetNS(t, addrs()...) {
		return
	}
	e, c := setUp(t)
	l := harness.NewLoad(clients(c))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	go func() {
		time.Sleep(3 * time.Second)
		l.Down[1].Store(true)
		c.Server(1).Kill()
	}()
	l.Run(ctx, 12)

	took := harness.WaitEndpoints(t, c.Client(0), harness.Addrs(0, 2), 50*time.Millisecond, 15*time.Second)
	t.Logf("the killed apiserver was out of the endpoints %s after the load ended", took)
	l.Verify(t, c.Client(0))
	settled(t, c.Client(2), e)
}

// TestEtcdQuorum stops one etcd member (quorum kept) and then a second
// (quorum lost), and starts them again, without restarting apiservers.
func TestEtcdQuorum(t *testing.T) {
	if !harness.InNetNS(t, addrs()...) {
		return
	}
	e, c := setUp(t)
	l := harness.NewLoad(clients(c))
	create := func(name string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var errs []string
		for i := range 3 {
			n := fmt.Sprintf("%s-%d", name, i)
			_, err := c.Client(i).CoreV1().ConfigMaps("default").Create(ctx, configMap(n), metav1.CreateOptions{})
			if err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return nil
	}

	e.Stop(2)
	if err := create("one-member-down", 20*time.Second); err != nil {
		t.Fatalf("with one of three etcd members down: %v", err)
	}

	e.Stop(1)
	start := time.Now()
	if err := create("quorum-lost", 3*time.Second); err == nil {
		t.Fatal("writes succeeded without an etcd quorum")
	} else {
		t.Logf("without quorum, writes fail (%s): %v", time.Since(start).Round(time.Millisecond), firstLine(err))
	}
	for i := range 3 {
		eventually(t, 20*time.Second, func(ctx context.Context) error {
			body, err := c.Client(i).CoreV1().RESTClient().Get().AbsPath("/readyz").Param("verbose", "").DoRaw(ctx)
			if err == nil {
				return fmt.Errorf("apiserver %d still ready without quorum", i)
			}
			if !strings.Contains(string(body), "[-]etcd") {
				return fmt.Errorf("apiserver %d /readyz does not name etcd: %s", i, body)
			}
			return nil
		})
	}

	r1, r2 := e.StartAsync(1), e.StartAsync(2)
	if err := <-r1; err != nil {
		t.Fatal(err)
	}
	if err := <-r2; err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		eventually(t, 60*time.Second, func(ctx context.Context) error {
			_, err := c.Client(i).CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		})
	}
	if err := create("recovered", 20*time.Second); err != nil {
		t.Fatalf("after quorum returned: %v", err)
	}
	// A short load on the recovered cluster, then the full check.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l.Run(ctx, 6)
	l.Verify(t, c.Client(0))
	settled(t, c.Client(1), e)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
