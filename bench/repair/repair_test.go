// Package repair measures the Service repair loops at scale: with 20,000
// Services (2,000 of them NodePort) stored, how long one ClusterIP and one
// NodePort repair pass takes, and how long a restart takes to be ready
// (the first passes gate /readyz).
//
//	go test ./bench/repair -run '^$' -bench . -benchtime 1x -timeout 30m
//
// The passes are timed by the server itself (metric
// kubeboot_service_repair_duration_seconds); the benchmark reads the mean
// of the passes that ran after the Services were created.
package repair

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

const (
	services  = 20000
	nodePorts = 2000
	workers   = 64
)

func TestMain(m *testing.M) { harness.Main(m) }

func BenchmarkRepair20kServices(b *testing.B) {
	kubeboot := benchserver.APIServer(b, 5*time.Minute,
		"--service-cluster-ip-range", "10.96.0.0/16", "--service-ip-repair-interval", "2s")
	for i := 0; i < b.N; i++ {
		srv := kubeboot.Start(b)
		client := srv.MustClient(b)
		t0 := time.Now()
		if err := createServices(client); err != nil {
			b.Fatal(err)
		}
		b.Logf("created %d Services in %s", services, time.Since(t0).Round(time.Millisecond))

		before := repairStats(b, client)
		time.Sleep(5 * time.Second) // at least two passes of each loop
		after := repairStats(b, client)
		for _, a := range []string{"clusterip", "nodeport"} {
			n := after[a].count - before[a].count
			if n == 0 {
				b.Fatalf("no %s repair pass ran", a)
			}
			b.ReportMetric((after[a].sum-before[a].sum)/n*1000, a+"-pass-ms")
		}
		benchserver.Stop(b, srv, 30*time.Second)

		// Restart on the same data: the first passes over 20,000 Services
		// gate readiness.
		t0 = time.Now()
		srv = kubeboot.StartIn(b, srv.DataDir)
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "restart-ready-ms")
		benchserver.Stop(b, srv, 30*time.Second)
	}
}

func createServices(client kubernetes.Interface) error {
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= services {
					return
				}
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
					Spec: corev1.ServiceSpec{
						Selector: map[string]string{"app": strconv.Itoa(i)},
						Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
					},
				}
				if i < nodePorts {
					svc.Spec.Type = corev1.ServiceTypeNodePort
				}
				if _, err := client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d creates failed, first: %v", n, firstErr.Load())
	}
	return nil
}

type histogram struct{ sum, count float64 }

// repairStats reads kubeboot_service_repair_duration_seconds from /metrics.
func repairStats(b *testing.B, client kubernetes.Interface) map[string]histogram {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]histogram{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, a := range []string{"clusterip", "nodeport"} {
			for suffix, set := range map[string]func(*histogram, float64){
				"_sum":   func(h *histogram, v float64) { h.sum = v },
				"_count": func(h *histogram, v float64) { h.count = v },
			} {
				prefix := `kubeboot_service_repair_duration_seconds` + suffix + `{allocator="` + a + `"} `
				if strings.HasPrefix(line, prefix) {
					v, err := strconv.ParseFloat(strings.TrimPrefix(line, prefix), 64)
					if err != nil || math.IsNaN(v) {
						b.Fatalf("bad metric line %q", line)
					}
					h := out[a]
					set(&h, v)
					out[a] = h
				}
			}
		}
	}
	return out
}
