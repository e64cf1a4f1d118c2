// Package agent measures `kubeboot agent`: exec → its Node Ready, on a
// server at 198.51.100.1 (run.sh makes the namespace), the kubelet on
// upstream's fake CRI runtime, or with -embedded-containerd on the
// agent's embedded containerd (runc and the CNI plugins installed).
// Issue 28's and 38's target: ≤ 3 s on loopback.
package agent

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

var embedded = flag.Bool("embedded-containerd", false, "run each agent on its embedded containerd, not on the fake CRI runtime")

// BenchmarkAgentJoin starts an agent with a new node name and data dir
// each iteration, times exec → its Node Ready, and stops it; the last
// agent's, its kubelet's and its containerd's resident memory, 10 s after,
// are reported.
func BenchmarkAgentJoin(b *testing.B) {
	addr := harness.Addr(0)
	harness.RequireAddrs(b, addr)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	srv := harness.StartReadyServer(b, 2*time.Minute, bin, filepath.Join(b.TempDir(), "server"),
		"--bind-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16")
	client := srv.MustClient(b)
	token, err := os.ReadFile(filepath.Join(srv.DataDir, "token"))
	if err != nil {
		b.Fatal(err)
	}
	cri := ""
	if !*embedded {
		cri = harness.StartFakeCRI(b)
	}
	node := harness.NodeArgs(b, cri)
	ctx := context.Background()
	var joins []time.Duration
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("agent-%d", i)
		dir := filepath.Join(b.TempDir(), name)
		args := append([]string{"--server", "https://" + addr + ":6443",
			"--token", strings.TrimSpace(string(token)), "--node-name", name, "--node-ip", addr}, node...)
		if *embedded {
			args = append(args, harness.EmbeddedContainerd(b, dir)...)
		}
		start := time.Now()
		a := harness.StartAgent(b, bin, dir, args...)
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && nodeutil.IsNodeReady(n), nil
		})
		if err != nil {
			b.Fatalf("node %s not Ready: %v\n%s", name, err, a.Logs())
		}
		joins = append(joins, time.Since(start))
		b.Logf("run %d: exec → node %s Ready in %d ms", i, name, time.Since(start).Milliseconds())
		if i == b.N-1 {
			// Idle memory of the last agent and its kubelet, 10 s after
			// its node is Ready.
			time.Sleep(10 * time.Second)
			b.ReportMetric(rssMB(b, a.PID()), "agent-rss-MB")
			for pid, p := range harness.Processes() {
				// Its children: `kubeboot kubelet`, `kubeboot containerd`.
				if p.Parent == a.PID() && len(p.Args) > 1 {
					b.ReportMetric(rssMB(b, pid), p.Args[1]+"-rss-MB")
				}
			}
		}
		if err := a.Terminate(30 * time.Second); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(joins)
	b.ReportMetric(float64(joins[len(joins)/2].Milliseconds()), "ready-ms")
	b.ReportMetric(float64(joins[len(joins)-1].Milliseconds()), "ready-max-ms")
}

// rssMB is process pid's resident memory in MB.
func rssMB(b *testing.B, pid int) float64 {
	status, err := harness.ProcStatus(pid)
	if err != nil {
		b.Fatal(err)
	}
	return float64(status["VmRSS"]) / 1000
}
