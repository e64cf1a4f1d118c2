// Package defaultservicecidr publishes the Service ranges given by
// --service-cluster-ip-range as the ServiceCIDR named "kubernetes", with a
// Ready condition, as kube-apiserver's kubernetes-service-cidr-controller.
// An existing default ServiceCIDR whose ranges differ from the flags is
// reported, not changed: its ranges are immutable.
package defaultservicecidr

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingapply "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Name, field manager and messages, as kube-apiserver's.
const (
	Name            = "kubernetes"
	FieldManager    = "kubernetes-service-cidr-controller"
	readyMessage    = "Kubernetes default Service CIDR is ready"
	DefaultInterval = 10 * time.Second
)

// Controller keeps the default ServiceCIDR.
type Controller struct {
	client   kubernetes.Interface
	cidrs    []string
	recorder record.EventRecorder
	interval time.Duration
}

// New returns a controller publishing cidrs.
func New(client kubernetes.Interface, cidrs []netip.Prefix, recorder record.EventRecorder, interval time.Duration) *Controller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	c := &Controller{client: client, recorder: recorder, interval: interval}
	for _, p := range cidrs {
		c.cidrs = append(c.cidrs, p.String())
	}
	return c
}

// Start writes the ServiceCIDR once (retrying until it succeeds or ctx
// ends), then keeps it every interval.
func (c *Controller) Start(ctx context.Context) error {
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.sync(ctx)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Writing the default ServiceCIDR, will retry", "err", err)
		}
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("writing the default ServiceCIDR: %w", err)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.sync(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Writing the default ServiceCIDR")
		}
	}, c.interval)
	return nil
}

func (c *Controller) sync(ctx context.Context) error {
	cidrs := c.client.NetworkingV1().ServiceCIDRs()
	cur, err := cidrs.Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = cidrs.Create(ctx, &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: Name},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: c.cidrs},
		}, metav1.CreateOptions{FieldManager: "kube-apiserver"})
	}
	if err != nil {
		return err
	}
	if !slices.Equal(cur.Spec.CIDRs, c.cidrs) {
		msg := fmt.Sprintf("default ServiceCIDR %v values do not match the flags %v; the flags are used for allocation, the object is left unchanged", cur.Spec.CIDRs, c.cidrs)
		klog.FromContext(ctx).Info("Warning: " + msg)
		c.recorder.Event(cur, corev1.EventTypeWarning, "KubernetesDefaultServiceCIDRInconsistent", msg)
		return nil
	}
	for _, cond := range cur.Status.Conditions {
		if cond.Type == networkingv1.ServiceCIDRConditionReady && cond.Status == metav1.ConditionTrue {
			return nil
		}
	}
	status := networkingapply.ServiceCIDR(Name).WithStatus(networkingapply.ServiceCIDRStatus().WithConditions(
		metav1apply.Condition().
			WithType(networkingv1.ServiceCIDRConditionReady).
			WithStatus(metav1.ConditionTrue).
			WithMessage(readyMessage).
			WithReason("").
			WithLastTransitionTime(metav1.Now())))
	_, err = cidrs.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}
