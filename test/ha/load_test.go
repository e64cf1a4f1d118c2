package ha

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/test/harness"
)

// TestKillEachServerUnderLoad: three servers on embedded etcd take
// Service creates and deletes (ClusterIP and NodePort) through all of
// them while each in turn is killed (kill -9) and restarted on its data
// dir: every acknowledged write is kept, and no ClusterIP or NodePort is
// held twice; what a killed server allocated for a Service it did not
// store is freed by the repair loops.
func TestKillEachServerUnderLoad(t *testing.T) {
	if !harness.InNetNS(t, harness.Addrs(0, 1, 2)...) {
		return
	}
	s := newServers(t)
	// Upstream's lease timings: no leader's successor is awaited here, and
	// a 3 s renew deadline is shorter than etcd's own request timeout
	// (7 s), so a renewal proposed to an etcd leader just killed would
	// wait past it and its server would stop, a fault of the test's
	// timings, not of the writes it checks.
	s.leases = nil
	// A kill between an allocation and its Service's store leaves the
	// allocation for the repair loops to free: they run every second.
	repair := []string{"--service-ip-repair-interval", "1s"}
	s.start(0, append(repair, "--cluster-init")...)
	token := s.token()
	for i := 1; i < 3; i++ {
		s.start(i, append(repair, "--server", s.url(0), "--token", token)...)
	}
	clients := []kubernetes.Interface{s.client(0), s.client(1), s.client(2)}
	l := harness.NewLoad(clients)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, 9)
	}()
	for i := range 3 {
		time.Sleep(2 * time.Second)
		l.Down[i].Store(true)
		s.proc[i].Kill()
		time.Sleep(2 * time.Second) // the others take the load meanwhile
		s.start(i, repair...)
		l.Down[i].Store(false)
	}
	time.Sleep(2 * time.Second)
	cancel()
	<-done

	l.Verify(t, s.client(0))
	// The node port bitmap is read from etcd, through the first server's
	// member on its data dir's socket.
	etcdClient, err := etcd.Dial(controlplane.EtcdDirIn(s.dataDir(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer etcdClient.Close()
	harness.CheckAllocations(t, s.client(0), etcdClient)
}
