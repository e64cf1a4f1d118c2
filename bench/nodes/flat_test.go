package nodes

import (
	"math"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
)

// flatCostLimit is issue 41's target for the server's CPU per Pod: with
// four times the nodes and Pods, at most 1.5 times as much.
const flatCostLimit = 1.5

// settle is how long a server with Ready nodes is left before it is
// measured: its components' own start (informers' lists, the first
// scrapes) is not the Pods' cost. idleSample is how long it is then
// watched, still without Pods, for what the nodes' heartbeats cost it.
const settle, idleSample = 5 * time.Second, 3 * time.Second

// flatCostRuns is how many times TestFlatCost measures each size: it
// keeps the least of each, since a busy or noisy machine only adds CPU
// (single runs of the same build ranged 1.07x to 1.62x).
const flatCostRuns = 2

// TestFlatCost is CI's check of issue 41's flat cost per Pod, at the size
// the issue names for CI: the CPU `kubeboot server` spends per Pod on 200
// simulated nodes and 6,000 Pods may be at most flatCostLimit times what
// it spends on 50 nodes and 1,500 (costPerPod), each the least of
// flatCostRuns runs, alternating.
func TestFlatCost(t *testing.T) {
	small, large := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	for range flatCostRuns {
		small = min(small, costPerPod(t, 50, 1500))
		large = min(large, costPerPod(t, 200, 6000))
	}
	ratio := float64(large) / float64(small)
	t.Logf("CPU per Pod, the least of %d runs: %s at 50 nodes / 1,500 Pods, %s at 200 / 6,000: %.2fx", flatCostRuns, small, large, ratio)
	if ratio > flatCostLimit {
		t.Errorf("CPU per Pod at 200 nodes / 6,000 Pods is %.2fx that at 50 / 1,500: more than %.1fx, so the cost per Pod grows with the cluster", ratio, flatCostLimit)
	}
}

// BenchmarkFlatCost is TestFlatCost's measurement, each iteration one run
// of each size, reporting the medians:
//
//	go test ./bench/nodes -run '^$' -bench FlatCost -benchtime 2x -timeout 40m
func BenchmarkFlatCost(b *testing.B) {
	var smalls, larges, ratios []float64
	for range b.N {
		small := costPerPod(b, 50, 1500)
		large := costPerPod(b, 200, 6000)
		ratio := float64(large) / float64(small)
		b.Logf("CPU per Pod: %s at 50 nodes / 1,500 Pods, %s at 200 / 6,000: %.2fx (target: at most %.1fx)", small, large, ratio, flatCostLimit)
		smalls, larges = append(smalls, float64(small)/1e6), append(larges, float64(large)/1e6)
		ratios = append(ratios, ratio)
	}
	b.ReportMetric(benchserver.Median(smalls), "small-ms/pod")
	b.ReportMetric(benchserver.Median(larges), "large-ms/pod")
	b.ReportMetric(benchserver.Median(ratios), "ratio")
}

// costPerPod is the CPU `kubeboot server` spends per Pod brought to
// Running and Ready, for pods Pods in Deployments of 30 on nodes simulated
// nodes, on a fresh server left to settle first, with what the idle nodes
// cost over the run taken out (a run slowed by a busy machine would
// otherwise count its heartbeats as the Pods' work).
func costPerPod(t testing.TB, nodes, pods int) time.Duration {
	srv := start(t, nodes)
	defer benchserver.Stop(t, srv.APIServer, time.Minute)
	pid := srv.PID()
	time.Sleep(settle)
	cpu0 := benchserver.CPUOf(t, pid)
	began := time.Now()
	time.Sleep(idleSample)
	idle := float64(benchserver.CPUOf(t, pid)-cpu0) / float64(time.Since(began)) // cores
	f := running(t, "kubeboot", srv.client, []int{pid}, nodes, pods)
	work := f.cpu - time.Duration(idle*float64(f.took))
	t.Logf("%d nodes: idle %.3f cores; %s of CPU in %s, %s of it the Pods'", nodes, idle, f.cpu.Round(time.Millisecond), f.took.Round(time.Millisecond), work.Round(time.Millisecond))
	return work / time.Duration(pods)
}
