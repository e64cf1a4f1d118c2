// Package systemnamespaces keeps the system namespaces (default,
// kube-system, kube-public, kube-node-lease) in existence: it creates the
// missing ones at start and then every interval, as kube-apiserver's
// system namespaces controller.
package systemnamespaces

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// DefaultInterval is how often missing namespaces are recreated.
const DefaultInterval = time.Minute

// Names are the system namespaces, in the order they are created.
func Names() []string {
	return []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease, metav1.NamespaceDefault}
}

// Controller creates missing system namespaces.
type Controller struct {
	client     kubernetes.Interface
	namespaces []string
	interval   time.Duration
}

// New returns a controller; interval 0 means DefaultInterval.
func New(client kubernetes.Interface, interval time.Duration) *Controller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Controller{client: client, namespaces: Names(), interval: interval}
}

// Start creates the namespaces once (retrying until it succeeds or ctx
// ends), then keeps them in the background until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.sync(ctx); err != nil {
			klog.FromContext(ctx).V(2).Info("Creating system namespaces, will retry", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("creating system namespaces: %w", err)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.sync(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Creating system namespaces")
		}
	}, c.interval)
	return nil
}

// sync creates every missing system namespace.
func (c *Controller) sync(ctx context.Context) error {
	var errs []error
	for _, name := range c.namespaces {
		if _, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("namespace %s: %w", name, err))
			continue
		}
		if err == nil {
			klog.FromContext(ctx).Info("Created system namespace", "namespace", name)
		}
	}
	return errors.Join(errs...)
}
