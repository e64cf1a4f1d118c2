package server

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// heartbeat is how often the test node renews its lease and status; the
// node lifecycle controller marks a node NotReady after 40s without.
const heartbeat = 5 * time.Second

// startNode registers a Ready node named name and keeps it so, as a
// kubelet would, until the test ends: it renews the node's Lease in
// kube-node-lease and its Ready condition, and finishes the deletion of
// its Pods (a kubelet deletes a terminating Pod once its containers have
// stopped). Its Pods never run: the test acts only as far as the control
// plane needs.
func startNode(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("registering node %s: %v", name, err)
	}
	renew := func(ctx context.Context) {
		now := metav1.Now()
		capacity := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		}
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return
		}
		n.Status.Capacity, n.Status.Allocatable = capacity, capacity
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", Message: "test node", LastHeartbeatTime: now, LastTransitionTime: now}}
		_, _ = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})

		leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, _ = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime: &metav1.MicroTime{Time: now.Time}},
			}, metav1.CreateOptions{})
			return
		} else if err != nil {
			return
		}
		lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Time}
		_, _ = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	renew(ctx)
	go wait.UntilWithContext(ctx, renew, heartbeat)
	go wait.UntilWithContext(ctx, func(ctx context.Context) { finishDeletions(ctx, client, name) }, 200*time.Millisecond)
}

// finishDeletions deletes at once the terminating Pods bound to node.
func finishDeletions(ctx context.Context, client kubernetes.Interface, node string) {
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			_ = client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID},
			})
		}
	}
}
