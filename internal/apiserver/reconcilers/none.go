package reconcilers

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// noneReconciler leaves the endpoints alone (--endpoint-reconciler-type=none).
type noneReconciler struct{}

// NewNone returns a reconciler that does nothing.
func NewNone() EndpointReconciler { return noneReconciler{} }

func (noneReconciler) ReconcileEndpoints(context.Context, netip.Addr, []corev1.EndpointPort, bool) error {
	return nil
}

func (noneReconciler) RemoveEndpoints(context.Context, netip.Addr, []corev1.EndpointPort) (bool, error) {
	return false, nil
}

func (noneReconciler) StopReconciling()         {}
func (noneReconciler) Changed() <-chan struct{} { return nil }
func (noneReconciler) Destroy()                 {}
