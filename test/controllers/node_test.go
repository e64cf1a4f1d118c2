package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
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
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// heartbeat is how often the test node renews its lease and status; the
// node lifecycle controller marks a node NotReady after its
// --node-monitor-grace-period (50s by default) without.
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
	runNode(ctx, t, client, name)
}

// startStoppableNode is startNode, and returns stop, which kills the
// node's "kubelet" before the test ends: its Lease, Ready condition and
// Pod deletions are no longer renewed or finished, and the Node object
// stays, as when a node goes down.
func startStoppableNode(t *testing.T, client kubernetes.Interface, name string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runNode(ctx, t, client, name)
	return cancel
}

// runNode registers node name and keeps it Ready until ctx is done (see
// startNode).
func runNode(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
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

// podIPs counts the Pod IPs reportPodStatus has handed out, so that each
// Pod gets its own, as from a node's CNI plugin.
var podIPs atomic.Uint32

// reportPodStatus acts as the kubelet of the node Pod ns/name is bound
// to, since no kubelet runs the test nodes' Pods: once the scheduler has
// bound it, it reports the Pod Running (its containers started, Ready as
// ready says, with a Pod IP in 10.244.0.0/16 kept across reports) or
// Succeeded or Failed (its containers terminated with exit code 0 or 1).
// Controllers that wait for Pods to run, be Ready or finish then see
// them so.
func reportPodStatus(t *testing.T, client kubernetes.Interface, ns, name string, phase corev1.PodPhase, ready bool) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("Pod %s/%s bound, then reported %s (ready %t)", ns, name, phase, ready),
		func(ctx context.Context) (bool, string) {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p.Spec.NodeName == "" {
					return fmt.Errorf("not bound to a node yet")
				}
				setKubeletStatus(p, phase, ready)
				_, err = client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				return err
			})
			return err == nil, fmt.Sprint(err)
		})
}

// setKubeletStatus sets p's status as a kubelet reports a Pod in phase.
func setKubeletStatus(p *corev1.Pod, phase corev1.PodPhase, ready bool) {
	now := metav1.Now()
	st := &p.Status
	running := phase == corev1.PodRunning
	ready = ready && running
	st.Phase = phase
	if st.StartTime == nil {
		st.StartTime = &now
	}
	if st.PodIP == "" {
		n := podIPs.Add(1)
		st.PodIP = fmt.Sprintf("10.244.%d.%d", n/250, n%250+1)
	}
	st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	st.HostIP = "192.0.2.1"
	st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}

	st.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: ready, Started: ptr.To(running)}
		switch phase {
		case corev1.PodRunning:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: *st.StartTime}
		case corev1.PodSucceeded:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: *st.StartTime, FinishedAt: now}
		case corev1.PodFailed:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: *st.StartTime, FinishedAt: now}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}

	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	for _, c := range []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: readyStatus},
		{Type: corev1.PodReady, Status: readyStatus},
	} {
		c.LastTransitionTime = now
		if i := slices.IndexFunc(st.Conditions, func(old corev1.PodCondition) bool { return old.Type == c.Type }); i < 0 {
			st.Conditions = append(st.Conditions, c)
		} else if st.Conditions[i].Status != c.Status {
			st.Conditions[i] = c
		}
	}
}
