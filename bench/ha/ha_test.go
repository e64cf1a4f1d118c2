// Package ha measures what a cluster of three kubeboot servers on
// embedded etcd costs against one (issue 27): 2,000 Services created at
// concurrency 32, through the one server, or spread over the three, and
// with -peer through kube-apiserver 1.37.2 on a three-member etcd cluster
// in the same iterations. It needs 198.51.100.1-3 and .11-.13 on this
// host; run.sh runs it in a private network namespace that has them:
//
//	bench/ha/run.sh -test.benchtime 3x [-peer]
package ha

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

const (
	services    = 2000
	concurrency = 32
)

var peer = flag.Bool("peer", false, "also run kube-apiserver 1.37.2 on a three-member etcd cluster in every iteration")

func TestMain(m *testing.M) { harness.Main(m) }

func BenchmarkServices(b *testing.B) {
	harness.RequireAddrs(b, append(harness.Addrs(0, 1, 2), harness.EtcdAddr(0), harness.EtcdAddr(1), harness.EtcdAddr(2))...)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	var peerBin string
	if *peer {
		if peerBin, err = harness.BuildPeer(b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
	args := func(i int, extra ...string) []string {
		return append([]string{"--bind-address", harness.Addr(i), "--advertise-address", harness.Addr(i), "--secure-port", "6443",
			"--service-cluster-ip-range", "10.96.0.0/16", "--audit-policy-file=", "--etcd-disable-snapshots"}, extra...)
	}
	rates := map[string][]float64{}
	p99s := map[string][]float64{}
	var conflicts atomic.Int64
	record := func(name string, clients []kubernetes.Interface) {
		rate, latencies := benchserver.Creates(b, services, concurrency, func(i int) error {
			create := benchserver.CreateService(clients[i%len(clients)], corev1.ServiceTypeClusterIP)
			err := create(i)
			// Two servers that choose the same ClusterIP at once retry
			// the losing create themselves (docs/decisions.md,
			// ClusterIPs); a 409 here would be counted.
			for try := 0; apierrors.IsConflict(err) && try < 3; try++ {
				conflicts.Add(1)
				err = create(i)
			}
			return err
		})
		rates[name] = append(rates[name], rate)
		p99s[name] = append(p99s[name], benchserver.Percentile(latencies, 99))
	}
	for range b.N {
		root := b.TempDir()
		dir := func(i int) string { return filepath.Join(root, string(rune('0'+i))) }

		one := harness.StartReadyAPIServer(b, time.Minute, bin, dir(0), args(0)...)
		record("one", []kubernetes.Interface{one.MustClient(b)})
		one.Kill()

		root = b.TempDir()
		first := harness.StartReadyNamed(b, time.Minute, bin, "apiserver", "server0", dir(0), args(0, "--cluster-init")...)
		token, err := os.ReadFile(filepath.Join(dir(0), "token"))
		if err != nil {
			b.Fatal(err)
		}
		servers := []*harness.APIServer{first}
		for i := 1; i < 3; i++ {
			servers = append(servers, harness.StartReadyNamed(b, 2*time.Minute, bin, "apiserver", fmt.Sprintf("server%d", i), dir(i),
				args(i, "--server", "https://"+harness.Addr(0)+":6443", "--token", strings.TrimSpace(string(token)))...))
		}
		var clients []kubernetes.Interface
		for _, s := range servers {
			clients = append(clients, s.MustClient(b))
		}
		record("three", clients)
		for _, s := range servers {
			s.Kill()
		}

		if *peer {
			etcd := harness.NewEtcdCluster(b, 3)
			p := harness.StartPeer(b, peerBin, b.TempDir(), strings.Join(etcd.Endpoints(), ","),
				append(etcd.Args(), "--service-cluster-ip-range=10.96.0.0/16")...)
			client, err := kubernetes.NewForConfig(p.Config)
			if err != nil {
				b.Fatal(err)
			}
			record("peer", []kubernetes.Interface{client})
			p.Stop()
			for i := range 3 {
				etcd.Stop(i)
			}
		}
	}
	for _, name := range []string{"one", "three", "peer"} {
		if len(rates[name]) == 0 {
			continue
		}
		b.ReportMetric(benchserver.Median(rates[name]), name+"-creates/s")
		b.ReportMetric(benchserver.Median(p99s[name]), name+"-p99-ms")
	}
	b.ReportMetric(benchserver.Median(rates["three"])/benchserver.Median(rates["one"]), "three/one")
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
	if *peer {
		b.ReportMetric(benchserver.Median(rates["three"])/benchserver.Median(rates["peer"]), "three/peer")
	}
}
