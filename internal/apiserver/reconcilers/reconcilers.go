// Package reconcilers keeps the endpoints of the default/kubernetes Service
// listing the apiservers that serve the cluster: one address per live
// apiserver, written to both the Endpoints and the EndpointSlice named
// "kubernetes". Three strategies, chosen by --endpoint-reconciler-type:
// lease (each apiserver holds an etcd lease), master-count (a fixed count),
// and none.
package reconcilers

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
)

// Type is the value of --endpoint-reconciler-type.
type Type string

// The reconciler types, as kube-apiserver's.
const (
	Lease       Type = "lease"
	MasterCount Type = "master-count"
	None        Type = "none"
)

// ParseType checks a --endpoint-reconciler-type value.
func ParseType(s string) (Type, error) {
	switch t := Type(s); t {
	case Lease, MasterCount, None:
		return t, nil
	}
	return "", fmt.Errorf("--endpoint-reconciler-type %q: must be one of %q, %q, %q", s, Lease, MasterCount, None)
}

// EndpointReconciler keeps this apiserver's address in the kubernetes
// Service's endpoints.
type EndpointReconciler interface {
	// ReconcileEndpoints makes the endpoints hold ip with ports, and (lease)
	// only the addresses of live apiservers. reconcilePorts also corrects
	// ports that differ.
	ReconcileEndpoints(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort, reconcilePorts bool) error
	// RemoveEndpoints removes ip. It reports whether ip was listed.
	RemoveEndpoints(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort) (bool, error)
	// StopReconciling makes later ReconcileEndpoints calls do nothing, so a
	// stopping apiserver does not re-add itself.
	StopReconciling()
	// Changed signals when the set of apiservers may have changed between
	// periodic reconciles (a lease expired); nil when there is no such
	// signal.
	Changed() <-chan struct{}
	// Destroy releases what the reconciler holds (the etcd lease).
	Destroy()
}

// onConflict retries fn while it loses a race with another apiserver
// writing the same objects (a stale resourceVersion, or both creating).
func onConflict(fn func() error) error {
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, fn)
}
