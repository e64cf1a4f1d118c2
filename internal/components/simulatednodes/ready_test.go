package simulatednodes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeboot/kubeboot/internal/platform/progress"
)

// readyNode is simulated node i, Ready or not.
func readyNode(i int, ready bool) *corev1.Node {
	n := newNode(i, []string{"10.128.0.0/24"})
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

// TestWaitReady: the wait goes on as long as nodes keep becoming Ready,
// however long that takes, and fails, naming how many are, once none
// more has for the stall it is given.
func TestWaitReady(t *testing.T) {
	const stall = 300 * time.Millisecond
	ctx := context.Background()
	noReport := progress.Func(func(progress.Update) {})

	t.Run("stalled", func(t *testing.T) {
		client := fake.NewClientset(readyNode(0, true), readyNode(1, false), readyNode(2, false))
		began := time.Now()
		err := waitReady(ctx, client, 3, stall, noReport)
		if err == nil || !strings.Contains(err.Error(), "1 of 3 nodes Ready") {
			t.Fatalf("waitReady: %v, want an error naming 1 of 3 nodes Ready", err)
		}
		if took := time.Since(began); took < stall {
			t.Errorf("failed after %s, before the stall of %s", took, stall)
		}
	})

	t.Run("slow but progressing", func(t *testing.T) {
		const count = 4
		var nodes []*corev1.Node
		for i := range count {
			nodes = append(nodes, readyNode(i, false))
		}
		client := fake.NewClientset(nodes[0], nodes[1], nodes[2], nodes[3])
		go func() {
			// A node more every two thirds of the stall: all of them
			// take longer than the stall, none more than it alone.
			for i := range count {
				time.Sleep(2 * stall / 3)
				if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, readyNode(i, true), metav1.UpdateOptions{}); err != nil {
					t.Error(err)
				}
			}
		}()
		if err := waitReady(ctx, client, count, stall, noReport); err != nil {
			t.Fatalf("waitReady: %v", err)
		}
	})
}
