package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/test/harness"
)

// checkNodeResourceMetrics: the resource metrics API serves each of nodes
// and of pods (in the default namespace) with usage, scraped from their
// kubelets, and `kubectl top` shows them.
func checkNodeResourceMetrics(t *testing.T, srv *harness.APIServer, nodes, pods []string) {
	metrics := srv.MetricsClient(t)
	harness.Eventually(t, time.Minute, fmt.Sprintf("metrics of nodes %v and Pods %v", nodes, pods), func(ctx context.Context) (bool, string) {
		var missing []string
		for _, n := range nodes {
			m, err := metrics.MetricsV1beta1().NodeMetricses().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				missing = append(missing, fmt.Sprintf("node %s: %v", n, err))
			} else if m.Usage.Memory().IsZero() {
				missing = append(missing, fmt.Sprintf("node %s: no memory used", n))
			}
		}
		for _, p := range pods {
			m, err := metrics.MetricsV1beta1().PodMetricses(metav1.NamespaceDefault).Get(ctx, p, metav1.GetOptions{})
			if err != nil {
				missing = append(missing, fmt.Sprintf("Pod %s: %v", p, err))
			} else if len(m.Containers) == 0 {
				missing = append(missing, fmt.Sprintf("Pod %s: no containers", p))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	out := srv.Kubectl(t, "top", "nodes", "--no-headers")
	for _, n := range nodes {
		if !strings.Contains(out, n) {
			t.Errorf("kubectl top nodes: %q, want %s", out, n)
		}
	}
	out = srv.Kubectl(t, "top", "pods", "--no-headers")
	for _, p := range pods {
		if !strings.Contains(out, p) {
			t.Errorf("kubectl top pods: %q, want %s", out, p)
		}
	}
}
