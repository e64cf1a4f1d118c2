// Package join measures how long a kubeboot server takes to join a
// cluster on embedded etcd (issue 27): from the exec of `kubeboot
// apiserver --server ... --token ...` to its /readyz 200, for the second
// server (joining a lone --cluster-init member) and the third, on an
// empty cluster or one holding -objects ConfigMaps. Each server has a host
// name of its own, as on machines of their own: with one name they would
// share an apiserver identity Lease, which a starting server deletes. It needs
// 198.51.100.1-3 on this host; run.sh runs it in a private network
// namespace that has them:
//
//	bench/join/run.sh -test.benchtime 5x [-objects 10000]
package join

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

var objects = flag.Int("objects", 0, "ConfigMaps of about 1 KiB stored before the joins, for the joining servers to catch up with")

func TestMain(m *testing.M) { harness.Main(m) }

func BenchmarkJoin(b *testing.B) {
	addrs := harness.Addrs(0, 1, 2)
	harness.RequireAddrs(b, addrs...)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	args := func(i int, extra ...string) []string {
		return append([]string{"--bind-address", addrs[i], "--advertise-address", addrs[i], "--secure-port", "6443",
			"--service-cluster-ip-range", "10.96.0.0/16"}, extra...)
	}
	var second, third []float64
	for range b.N {
		root := b.TempDir()
		dir := func(i int) string { return filepath.Join(root, string(rune('0'+i))) }
		first := harness.StartReadyNamed(b, time.Minute, bin, "apiserver", "server0", dir(0), args(0, "--cluster-init")...)
		benchserver.CreateConfigMaps(b, first.MustClient(b), *objects)
		token, err := os.ReadFile(filepath.Join(dir(0), "token"))
		if err != nil {
			b.Fatal(err)
		}
		var started []*harness.APIServer
		for i, via := range []int{0, 1} {
			start := time.Now()
			s := harness.StartReadyNamed(b, time.Minute, bin, "apiserver", fmt.Sprintf("server%d", i+1), dir(i+1),
				args(i+1, "--server", "https://"+addrs[via]+":6443", "--token", strings.TrimSpace(string(token)))...)
			took := float64(time.Since(start).Milliseconds())
			if i == 0 {
				second = append(second, took)
			} else {
				third = append(third, took)
			}
			started = append(started, s)
		}
		// Killed, not stopped: the last of three to stop has no quorum
		// left, and its clean stop waits on etcd.
		for _, s := range append(started, first) {
			s.Kill()
		}
	}
	b.ReportMetric(benchserver.Median(second), "second-join-ms")
	b.ReportMetric(slices.Max(second), "second-join-max-ms")
	b.ReportMetric(benchserver.Median(third), "third-join-ms")
	b.ReportMetric(slices.Max(third), "third-join-max-ms")
}
