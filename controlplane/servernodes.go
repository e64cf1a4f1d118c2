package controlplane

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// A server of a cluster that is also a node (--node) is tied to its etcd
// member as k3s's servers are: its Node names the member and holds a
// finalizer, so that deleting the Node of a server gone for good
// (kubectl delete node) removes its member from etcd, where it would
// otherwise count towards the quorum for ever.

const (
	// EtcdMemberAnnotation on a Node names the etcd member of the server
	// that runs it.
	EtcdMemberAnnotation = "etcd.kubeboot.io/member"
	// EtcdMemberFinalizer keeps a server's Node until its member is
	// removed.
	EtcdMemberFinalizer = "etcd.kubeboot.io/member"
	// EtcdRoleLabel=true marks the Node of a server with an etcd member
	// (k3s's label), which the servers watch.
	EtcdRoleLabel = "node-role.kubernetes.io/etcd"
)

// TieNode ties Node name to this server: the Events about the server go
// to it and, in a cluster of servers, once the kubelet has registered it,
// it gets EtcdRoleLabel, EtcdMemberAnnotation and the finalizer.
func (s *Server) TieNode(ctx context.Context, name string) error {
	s.nodeName.Store(name)
	if s.cfg.cluster == nil || s.etcd == nil {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:%q},"finalizers":[%q]}}`,
		EtcdRoleLabel, EtcdMemberAnnotation, s.etcd.Name(), EtcdMemberFinalizer)
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := s.api.Client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil // not registered yet
		}
		return err == nil, err
	})
}

// removeDeletedServers removes the etcd member of each server whose Node
// is being deleted, then the Node's finalizer. Every server does it (a
// removal is idempotent) but for its own Node: a member that removes
// itself leaves the cluster and stops, so the others remove it, and a
// server alone only lets its Node go.
func (s *Server) removeDeletedServers(ctx context.Context) {
	if s.cfg.cluster == nil || s.etcd == nil {
		return
	}
	logger := klog.FromContext(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(s.api.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = EtcdRoleLabel + "=true"
	}))
	nodes := factory.Core().V1().Nodes()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "etcd-member-removal"})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.DeletionTimestamp != nil && slices.Contains(n.Finalizers, EtcdMemberFinalizer) {
			queue.Add(n.Name)
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		logger.Error(err, "Watching Nodes for the etcd members of deleted servers")
		return
	}
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	for {
		name, shutdown := queue.Get()
		if shutdown {
			return
		}
		if err := s.removeServerOf(ctx, nodes.Lister().Get, name); err != nil && ctx.Err() == nil {
			logger.Error(err, "Removing the etcd member of a deleted server's Node, will retry", "node", name)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
		if ctx.Err() != nil {
			return
		}
	}
}

// removeServerOf removes the etcd member Node name's annotation names,
// then the Node's finalizer.
func (s *Server) removeServerOf(ctx context.Context, get func(string) (*corev1.Node, error), name string) error {
	node, err := get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	switch member := node.Annotations[EtcdMemberAnnotation]; member {
	case "":
	case s.etcd.Name():
		// This server's own Node: the others remove its member, unless
		// there are none.
		members, err := s.etcd.Client().MemberList(ctx)
		if err != nil {
			return err
		}
		if len(members.Members) > 1 {
			return nil
		}
	default:
		removed, err := s.etcd.RemoveNamed(ctx, member)
		if err != nil {
			return err
		}
		if removed {
			klog.FromContext(ctx).Info("Removed the etcd member of a deleted server's Node", "node", name, "member", member)
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.api.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		i := slices.Index(n.Finalizers, EtcdMemberFinalizer)
		if i < 0 {
			return nil
		}
		n.Finalizers = slices.Delete(n.Finalizers, i, i+1)
		_, err = s.api.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
