// Package failover measures how fast the kubernetes endpoints follow the
// apiservers of a cluster: three apiserver processes on one etcd, inside a
// private network namespace (198.51.100.1-3 on its lo).
//
//	bench/failover/run.sh            # -benchtime 5x by default
//
// run.sh builds the binaries, then runs the benchmark inside a new network
// namespace (unshare --net, as root); outside one it is skipped.
//
// BenchmarkFailover reports, as medians over the iterations, how long a
// SIGKILLed and a SIGTERMed apiserver stay listed, and how many etcd raft
// entries (writes) the idle cluster commits per second per apiserver.
// kube-apiserver 1.36 kept a SIGKILLed apiserver listed for 19.4 s.
package failover

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

func BenchmarkFailover(b *testing.B) {
	harness.RequireAddrs(b, harness.Addrs(0, 1, 2)...)
	c := harness.NewCluster(b, 3)
	for i := range 3 {
		c.Start(i)
	}
	client := c.Client(0)
	harness.WaitEndpoints(b, client, harness.Addrs(0, 1, 2), 20*time.Millisecond, 30*time.Second)

	// Idle cost: raft entries committed while nothing happens.
	idle := 10 * time.Second
	r0 := raftIndex(b, c)
	time.Sleep(idle)
	writes := float64(raftIndex(b, c)-r0) / idle.Seconds() / 3

	var kills, terms []time.Duration
	for i := 0; i < b.N; i++ {
		c.Server(1).Kill()
		kills = append(kills, harness.WaitEndpoints(b, client, harness.Addrs(0, 2), 10*time.Millisecond, 30*time.Second))
		c.Start(1)
		harness.WaitEndpoints(b, client, harness.Addrs(0, 1, 2), 20*time.Millisecond, 30*time.Second)

		done := make(chan error, 1)
		go func() { done <- c.Server(2).Terminate(30 * time.Second) }()
		terms = append(terms, harness.WaitEndpoints(b, client, harness.Addrs(0, 1), 2*time.Millisecond, 30*time.Second))
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		c.Start(2)
		harness.WaitEndpoints(b, client, harness.Addrs(0, 1, 2), 20*time.Millisecond, 30*time.Second)
	}
	b.ReportMetric(median(kills).Seconds()*1000, "sigkill-ms")
	b.ReportMetric(slices.Max(kills).Seconds()*1000, "sigkill-max-ms")
	b.ReportMetric(median(terms).Seconds()*1000, "sigterm-ms")
	b.ReportMetric(slices.Max(terms).Seconds()*1000, "sigterm-max-ms")
	b.ReportMetric(writes, "idle-writes/s/apiserver")
}

func raftIndex(b *testing.B, c *harness.Cluster) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.Etcd.Client().Status(ctx, c.Etcd.Endpoints()[0])
	if err != nil {
		b.Fatal(err)
	}
	return st.RaftIndex
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
