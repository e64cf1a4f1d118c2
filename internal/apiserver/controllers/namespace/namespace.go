// Package namespace finalizes deleted namespaces: once a namespace is
// Terminating it deletes every object in it, for every namespaced resource
// the server serves (found through discovery), then removes the
// "kubernetes" finalizer and deletes the namespace.
//
// In Kubernetes this is kube-controller-manager's namespace controller.
// kubeboot runs it in the apiserver process until it grows a
// controller-manager, so that deleted namespaces go away and system
// namespaces can be recreated.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// retryAfter is how soon a namespace whose contents are still going away
// is looked at again.
const retryAfter = 500 * time.Millisecond

// Controller finalizes Terminating namespaces.
type Controller struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	queue     workqueue.TypedRateLimitingInterface[string]
}

// New returns a controller fed by informer.
func New(client kubernetes.Interface, md metadata.Interface, informer coreinformers.NamespaceInformer) (*Controller, error) {
	c := &Controller{
		client:    client,
		metadata:  md,
		discovery: client.Discovery(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
	}
	enqueue := func(obj interface{}) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run processes namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	done, err := c.sync(ctx, name)
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "Finalizing namespace", "namespace", name)
		c.queue.AddRateLimited(name)
	case !done:
		c.queue.AddAfter(name, retryAfter)
	default:
		c.queue.Forget(name)
	}
	return true
}

// sync deletes the contents of a Terminating namespace; once it is empty
// it finalizes and deletes the namespace. It reports whether it is done.
func (c *Controller) sync(ctx context.Context, name string) (bool, error) {
	namespaces := c.client.CoreV1().Namespaces()
	ns, err := namespaces.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if ns.DeletionTimestamp == nil {
		return true, nil
	}
	if slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		empty, err := c.deleteContents(ctx, name)
		if err != nil || !empty {
			return false, err
		}
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		if ns, err = namespaces.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
			return false, fmt.Errorf("finalizing: %w", err)
		}
	}
	if len(ns.Spec.Finalizers) > 0 {
		// Another finalizer's owner finishes the job.
		return true, nil
	}
	err = namespaces.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, err
	}
	klog.FromContext(ctx).V(2).Info("Namespace deleted", "namespace", name)
	return true, nil
}

// deleteContents deletes every object in the namespace and reports
// whether none is left.
func (c *Controller) deleteContents(ctx context.Context, ns string) (bool, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return false, fmt.Errorf("discovering namespaced resources: %w", err)
	}
	empty := true
	var errs []error
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "deletecollection") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			res := c.metadata.Resource(gv.WithResource(r.Name)).Namespace(ns)
			if err := res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", r.Name, err))
				continue
			}
			left, err := res.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(left.Items) > 0 {
				empty = false
			}
		}
	}
	return empty && len(errs) == 0, errors.Join(errs...)
}

// Start runs the controller in the background once its informer synced.
func (c *Controller) Start(ctx context.Context, synced cache.InformerSynced) error {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return errors.New("namespace controller: informer did not sync")
	}
	go wait.UntilWithContext(ctx, c.Run, time.Second)
	return nil
}
