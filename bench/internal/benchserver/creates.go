package benchserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// Creates runs create for 0 ... n-1 from concurrency workers and returns
// creates/s and the sorted latencies of the creates; it fails tb if any
// create fails.
func Creates(tb testing.TB, n, concurrency int, create func(i int) error) (float64, []time.Duration) {
	tb.Helper()
	var next, failed atomic.Int64
	var firstErr atomic.Value
	latencies := make([]time.Duration, n)
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				err := create(i)
				latencies[i] = time.Since(t0)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		tb.Fatalf("%d of %d creates failed, the first: %v", f, n, firstErr.Load())
	}
	slices.Sort(latencies)
	return float64(n) / elapsed.Seconds(), latencies
}

// CreateService creates Service i of type typ in default.
func CreateService(client kubernetes.Interface, typ corev1.ServiceType) func(i int) error {
	return func(i int) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
			Spec: corev1.ServiceSpec{
				Type:     typ,
				Selector: map[string]string{"app": fmt.Sprintf("app-%d", i)},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		_, err := client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{})
		return err
	}
}

// CreateConfigMaps stores n ConfigMaps of about 1 KiB in default from 32
// workers, for a benchmark that needs data in etcd.
func CreateConfigMaps(tb testing.TB, client kubernetes.Interface, n int) {
	tb.Helper()
	data := map[string]string{"payload": strings.Repeat("x", 1024)}
	Creates(tb, n, 32, func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: data}
		_, err := client.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{})
		return err
	})
}

// Percentile is the p-th percentile (0-100) of sorted latencies, in ms.
func Percentile(sorted []time.Duration, p int) float64 {
	return float64(sorted[len(sorted)*p/100].Microseconds()) / 1000
}

// Median is the median of xs.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
