package reconcilers

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Internals for the external tests (package reconcilers_test), which must
// be external because they start a real server, and the server imports
// this package.

// Trim is trim: the master-count trimming rule.
var Trim = trim

// LeaseReconcile runs one reconcile pass of a lease reconciler (made by
// NewLease) without refreshing its own key; allowEmpty lets it write an
// empty set, as when stopping.
func LeaseReconcile(ctx context.Context, r EndpointReconciler, ports []corev1.EndpointPort, reconcilePorts, allowEmpty bool) error {
	return r.(*leaseReconciler).reconcile(ctx, netip.Addr{}, ports, reconcilePorts, allowEmpty)
}

// LeaseHold makes a lease reconciler (made by NewLease) hold ip's key.
func LeaseHold(ctx context.Context, r EndpointReconciler, ip netip.Addr) error {
	return r.(*leaseReconciler).leases.hold(ctx, ip)
}
