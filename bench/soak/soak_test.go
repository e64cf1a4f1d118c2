// Package soak runs a kubeboot apiserver process under mixed load for a
// while and records its resident memory and goroutine count over time:
// after warm-up both must stay flat.
//
//	go test ./bench/soak -run '^$' -bench . -benchtime 1x -timeout 30m -args -duration 6m
//
// Load: 8 workers creating, updating and deleting ConfigMaps and Services
// at a steady 200 operations per second, and 100 open watches (re-opened
// whenever the server ends one). The server compacts etcd every minute
// (-server-args): with kube-apiserver's default of 5 minutes, etcd keeps
// 5-10 minutes of history, and memory under churn only flattens after 10. Every 10 s
// the benchmark samples VmRSS of the process and go_goroutines; it prints
// the curve as a Markdown table and fails if the last third of the run
// grew more than 10% (RSS) or 5% (goroutines) over the middle third.
package soak

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

var (
	duration   = flag.Duration("duration", 5*time.Minute, "how long to load the server")
	interval   = flag.Duration("sample", 10*time.Second, "how often to sample RSS and goroutines")
	serverArgs = flag.String("server-args", "--etcd-compaction-interval=1m", "extra flags for the apiserver, space separated")
	opsRate    = flag.Float64("rate", 200, "write operations per second, all workers together")
)

func TestMain(m *testing.M) { harness.Main(m) }

type sample struct {
	at         time.Duration
	rss        float64 // MiB
	anon       float64 // MiB
	goroutines int
	ops        int64
}

func BenchmarkSoak(b *testing.B) {
	args := append([]string{"--service-cluster-ip-range", "10.96.0.0/16"}, strings.Fields(*serverArgs)...)
	srv := benchserver.APIServer(b, time.Minute, args...).Start(b)
	client := srv.MustClient(b)

	loadCtx, stop := context.WithTimeout(context.Background(), *duration)
	defer stop()
	var ops atomic.Int64
	var wg sync.WaitGroup
	// A steady rate: memory held for history windows follows the write
	// rate, so a rate that drifts would look like a leak or hide one.
	limiter := rate.NewLimiter(rate.Limit(*opsRate), 1)
	for w := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); churn(loadCtx, client, w, limiter, &ops) }()
	}
	for range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); watch(loadCtx, client) }()
	}

	var samples []sample
	start := time.Now()
	tick := time.NewTicker(*interval)
	for done := false; !done; {
		select {
		case <-loadCtx.Done():
			done = true
		case <-tick.C:
		}
		mem := benchserver.MemoryOf(b, srv.PID())
		samples = append(samples, sample{
			at: time.Since(start).Round(time.Second), rss: mem.RSS, anon: mem.Anon,
			goroutines: goroutines(b, client), ops: ops.Load(),
		})
	}
	tick.Stop()
	wg.Wait()
	report(b, samples)
	benchserver.Stop(b, srv, 30*time.Second)
}

// churn creates, updates and deletes objects in its own namespace.
func churn(ctx context.Context, c kubernetes.Interface, w int, limiter *rate.Limiter, ops *atomic.Int64) {
	ns := fmt.Sprintf("soak-%d", w)
	_, _ = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	rnd := rand.New(rand.NewPCG(uint64(w), 1))
	for i := 0; limiter.Wait(ctx) == nil; i++ {
		name := fmt.Sprintf("obj-%d", rnd.IntN(50))
		cms := c.CoreV1().ConfigMaps(ns)
		switch rnd.IntN(6) {
		case 0, 1:
			_, _ = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
		case 2:
			if cm, err := cms.Get(ctx, name, metav1.GetOptions{}); err == nil {
				cm.Data = map[string]string{"i": strconv.Itoa(i)}
				_, _ = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
		case 3:
			_ = cms.Delete(ctx, name, metav1.DeleteOptions{})
		case 4:
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
			_, _ = c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		case 5:
			_ = c.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
		ops.Add(1)
	}
}

// watch keeps a watch on ConfigMaps open, re-opening it when it ends.
func watch(ctx context.Context, c kubernetes.Interface) {
	for ctx.Err() == nil {
		w, err := c.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for range w.ResultChan() {
		}
		w.Stop()
	}
}

func goroutines(b *testing.B, c kubernetes.Interface) int {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	b.Fatal("no go_goroutines metric")
	return 0
}

// report prints the curve and fails if the last third grew over the middle.
func report(b *testing.B, s []sample) {
	var sb strings.Builder
	sb.WriteString("\n| time | RSS (MiB) | of it anonymous (MiB) | goroutines | operations |\n|---:|---:|---:|---:|---:|\n")
	for _, x := range s {
		fmt.Fprintf(&sb, "| %s | %.1f | %.1f | %d | %d |\n", x.at, x.rss, x.anon, x.goroutines, x.ops)
	}
	// Print, not b.Log: the table is the result, and b.Log truncates.
	fmt.Print(sb.String())
	if len(s) < 6 {
		b.Fatalf("only %d samples: run longer", len(s))
	}
	third := len(s) / 3
	mid, last := s[third:2*third], s[2*third:]
	avg := func(xs []sample, f func(sample) float64) float64 {
		t := 0.0
		for _, x := range xs {
			t += f(x)
		}
		return t / float64(len(xs))
	}
	rssOf := func(x sample) float64 { return x.rss }
	goroutinesOf := func(x sample) float64 { return float64(x.goroutines) }
	rssGrowth := avg(last, rssOf)/avg(mid, rssOf) - 1
	gGrowth := avg(last, goroutinesOf)/avg(mid, goroutinesOf) - 1
	b.ReportMetric(s[len(s)-1].rss, "final-rss-MiB")
	b.ReportMetric(rssGrowth*100, "rss-growth-%")
	b.ReportMetric(gGrowth*100, "goroutine-growth-%")
	b.ReportMetric(float64(s[len(s)-1].ops)/s[len(s)-1].at.Seconds(), "ops/s")
	if rssGrowth > 0.10 || gGrowth > 0.05 {
		b.Errorf("not flat after warm-up: RSS %+.1f%%, goroutines %+.1f%% (last third over middle third)", rssGrowth*100, gGrowth*100)
	}
}
