package controllers

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestSimulatedNodesRestartWithoutEviction stops a server with simulated
// nodes running Pods until every node's lease has expired, starts it again
// on the same data directory, and checks that the nodes stay Ready and
// untainted and the Pods stay where they were while the heartbeats resume:
// no mass eviction. The node lifecycle controller's grace period and the
// Pods' tolerations are short, so a node thought dead would be tainted
// and its Pods evicted within the test.
func TestSimulatedNodesRestartWithoutEviction(t *testing.T) {
	const (
		nodes    = 10
		replicas = 30
		lease    = 5 * time.Second
		// Wide enough for a loaded machine: the restarted server's nodes
		// renew their leases every 1.25 s.
		grace = 15 * time.Second
	)
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16",
		fmt.Sprintf("--simulated-nodes=%d", nodes), fmt.Sprintf("--simulated-node-lease-duration=%s", lease),
		"--controller-manager-arg=--node-monitor-period=1s",
		fmt.Sprintf("--controller-manager-arg=--node-monitor-grace-period=%s", grace),
		"--default-not-ready-toleration-seconds=1", "--default-unreachable-toleration-seconds=1",
	}
	srv := harness.StartReadyServer(t, time.Minute, bin, dataDir, args...)
	client := srv.MustClient(t)
	ctx := t.Context()

	labels := map[string]string{"app": "restart"}
	if _, err := client.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "restart"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// running is the Pods' UIDs and nodes, once all run.
	running := func(ctx context.Context) (map[string]string, string) {
		pods, err := podsOf(ctx, client, metav1.NamespaceDefault, labels)
		if err != nil {
			return nil, err.Error()
		}
		placed := map[string]string{}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				placed[string(p.UID)] = p.Spec.NodeName
			}
		}
		return placed, fmt.Sprintf("%d of %d Pods Running", len(placed), len(pods))
	}
	var before map[string]string
	harness.Eventually(t, time.Minute, fmt.Sprintf("%d Pods Running", replicas), func(ctx context.Context) (bool, string) {
		placed, state := running(ctx)
		before = placed
		return len(placed) == replicas, state
	})

	if err := srv.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Down for twice the lease: every lease has expired.
	time.Sleep(2 * lease)
	srv = harness.StartReadyServer(t, time.Minute, bin, dataDir, args...)
	client = srv.MustClient(t)

	// Two grace periods: the controller takes a node it has not heard
	// from within one as not Ready, taints it, and evicts its Pods a
	// second later.
	deadline := time.Now().Add(2 * grace)
	for time.Now().Before(deadline) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			t.Fatal(err)
		}
		var bad []string
		for _, n := range list.Items {
			if r := nodeReady(&n); r != corev1.ConditionTrue || len(n.Spec.Taints) > 0 {
				bad = append(bad, fmt.Sprintf("%s: Ready %q, taints %v", n.Name, r, n.Spec.Taints))
			}
		}
		if len(list.Items) != nodes || len(bad) > 0 {
			t.Fatalf("after the restart, %d nodes, not all Ready and untainted: %s", len(list.Items), strings.Join(bad, "; "))
		}
		placed, state := running(ctx)
		if !maps.Equal(placed, before) {
			t.Fatalf("after the restart, the Pods moved or stopped (%s): %d of the %d Running before are still Running on their node",
				state, countSame(placed, before), len(before))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// countSame counts the keys of a with the same value in b.
func countSame(a, b map[string]string) int {
	n := 0
	for k, v := range a {
		if w, ok := b[k]; ok && w == v {
			n++
		}
	}
	return n
}
