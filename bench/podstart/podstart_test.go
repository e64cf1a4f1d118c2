// Package podstart measures pod start-up latency on a real node: `kubeboot
// server --node` with its kubelet on containerd and runc and kubeboot's
// pod network (flannel, the CNI bridge), images made on the machine
// (no pulls, as the SIG scalability SLO counts it: p99 ≤ 5 s). run.sh
// makes the namespace.
package podstart

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// batch is how many Pods are created at once, SIG scalability's 30 Pods
// per node split in three waves.
const batch = 10

// BenchmarkPodStart creates b.N Pods, batch at a time, and times each from
// its create call to the watch showing it Running with an IP; p50 and p99
// are reported.
func BenchmarkPodStart(b *testing.B) {
	srv := harness.StartNodeServer(b, "--kubelet-arg=--max-pods=250")
	client := srv.MustClient(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	node, err := waitReadyNode(ctx, client)
	if err != nil {
		b.Fatal(err)
	}

	w, err := client.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	running := map[string]time.Duration{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				continue
			}
			mu.Lock()
			if start, ok := created[p.Name]; ok {
				if _, seen := running[p.Name]; !seen {
					running[p.Name] = time.Since(start)
				}
			}
			mu.Unlock()
		}
	}()

	b.ResetTimer()
	for first := 0; first < b.N; first += batch {
		var names []string
		for i := first; i < min(first+batch, b.N); i++ {
			name := fmt.Sprintf("pod-%d", i)
			names = append(names, name)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
					Name: "c", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
				}}},
			}
			mu.Lock()
			created[name] = time.Now()
			mu.Unlock()
			if _, err := client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		for _, name := range names {
			for {
				mu.Lock()
				_, ok := running[name]
				mu.Unlock()
				if ok {
					break
				}
				if ctx.Err() != nil {
					b.Fatalf("Pod %s not Running: %v", name, ctx.Err())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	b.StopTimer()
	var all []time.Duration
	for _, d := range running {
		all = append(all, d)
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(all[(len(all)*99-1)/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(all[len(all)-1].Milliseconds()), "max-ms")
	// The node's Pods go before containerd does.
	if err := client.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(context.Background(),
		metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		b.Error(err)
	}
}

// waitReadyNode waits for the one node to be Ready and returns its name.
func waitReadyNode(ctx context.Context, client kubernetes.Interface) (string, error) {
	var name string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 1 || !nodeutil.IsNodeReady(&nodes.Items[0]) {
			return false, nil
		}
		name = nodes.Items[0].Name
		return true, nil
	})
	return name, err
}
