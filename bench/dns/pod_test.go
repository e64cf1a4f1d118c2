package dns

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeboot/kubeboot/test/harness"
)

// BenchmarkClusterDNSFromPod asks the cluster DNS from inside a Pod, as
// workloads do: `kubeboot server --node` on containerd and the pod
// network, the Pod's queries to the kube-dns Service (10.96.0.10:53),
// which kube-proxy leads to the server's DNS port. Each iteration is
// `queries` queries from `clients` clients in the Pod (testcontainer
// dnsload); the medians of the iterations' queries/s, p50 and p99 are
// reported.
func BenchmarkClusterDNSFromPod(b *testing.B) {
	srv := harness.StartNodeServer(b)
	client := srv.MustClient(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-client", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
		}}},
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		b.Fatalf("Pod %s not Running: %v", pod.Name, err)
	}
	defer client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	kubectl, err := harness.Kubectl()
	if err != nil {
		b.Fatal(err)
	}
	dnsload := func() (qps, p50, p99 float64, err error) {
		var out, stderr bytes.Buffer
		cmd := exec.Command(kubectl, "--kubeconfig", filepath.Join(srv.DataDir, "admin.kubeconfig"), "exec", pod.Name, "--",
			harness.TestImageCommand, "dnsload", "10.96.0.10:53", question, fmt.Sprint(queries), fmt.Sprint(clients))
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			return 0, 0, 0, fmt.Errorf("%w: %s", err, stderr.String())
		}
		_, err = fmt.Sscan(out.String(), &qps, &p50, &p99)
		return qps, p50, p99, err
	}
	// kube-proxy leads the Service's port to the DNS once it has seen it.
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		_, _, _, err := dnsload()
		return err == nil, nil
	}); err != nil {
		b.Fatalf("no answers from the cluster DNS in the Pod: %v", err)
	}
	var qpss, p50s, p99s []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		qps, p50, p99, err := dnsload()
		if err != nil {
			b.Fatal(err)
		}
		qpss, p50s, p99s = append(qpss, qps), append(p50s, p50), append(p99s, p99)
	}
	b.StopTimer()
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(median(qpss), "queries/s")
	b.ReportMetric(median(p50s), "p50-µs")
	b.ReportMetric(median(p99s), "p99-µs")
}
