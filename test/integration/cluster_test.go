package integration

import (
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestEndpointsFollowLiveAPIServers runs three apiservers on one etcd and
// checks that the kubernetes endpoints list exactly the live ones through
// SIGKILL, SIGTERM, restart and the last one's graceful stop.
func TestEndpointsFollowLiveAPIServers(t *testing.T) {
	if !harness.InNetNS(t, harness.Addrs(0, 1, 2)...) {
		return
	}
	c := harness.NewCluster(t, 3)
	for i := range 3 {
		c.Start(i)
	}
	client := c.Client(0)
	harness.WaitEndpoints(t, client, harness.Addrs(0, 1, 2), 50*time.Millisecond, 15*time.Second)

	// A crashed apiserver leaves once its lease expires (3 s TTL): allow
	// generous headroom for a loaded CI machine; bench/failover measures.
	c.Server(1).Kill()
	took := harness.WaitEndpoints(t, client, harness.Addrs(0, 2), 10*time.Millisecond, 15*time.Second)
	t.Logf("SIGKILLed apiserver left the endpoints after %s", took)
	if took > 8*time.Second {
		t.Errorf("a SIGKILLed apiserver stayed in the endpoints for %s", took)
	}

	// A stopping apiserver removes itself before it stops serving.
	done := make(chan error, 1)
	go func() { done <- c.Server(2).Terminate(30 * time.Second) }()
	took = harness.WaitEndpoints(t, client, harness.Addrs(0), 5*time.Millisecond, 10*time.Second)
	t.Logf("SIGTERMed apiserver left the endpoints after %s", took)
	if took > 2*time.Second {
		t.Errorf("a SIGTERMed apiserver stayed in the endpoints for %s", took)
	}
	if err := <-done; err != nil {
		t.Errorf("SIGTERM: %v", err)
	}

	// A restarted apiserver rejoins.
	c.Start(1)
	harness.WaitEndpoints(t, client, harness.Addrs(0, 1), 50*time.Millisecond, 15*time.Second)

	// The last one out removes itself too.
	if err := c.Server(1).Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	harness.WaitEndpoints(t, client, harness.Addrs(0), 20*time.Millisecond, 10*time.Second)
	if err := c.Server(0).Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	ep := storedEndpoints(t, c.Etcd)
	if len(ep.Subsets) != 0 {
		t.Errorf("after the last apiserver stopped, the stored endpoints are %+v, want none", ep.Subsets)
	}
}
