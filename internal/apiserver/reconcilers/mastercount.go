package reconcilers

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// masterCountReconciler always adds its own address and, when more
// addresses are listed than --apiserver-count, drops those that sort right
// after its own (wrapping around), so that every apiserver converges on the
// same set.
type masterCountReconciler struct {
	adapter
	count   int
	mu      sync.Mutex
	stopped atomic.Bool
}

// NewMasterCount returns the master-count reconciler for count apiservers.
func NewMasterCount(client kubernetes.Interface, count int) EndpointReconciler {
	return &masterCountReconciler{adapter: adapter{client: client}, count: max(count, 1)}
}

func (r *masterCountReconciler) ReconcileEndpoints(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort, reconcilePorts bool) error {
	if r.stopped.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return onConflict(func() error { return r.reconcile(ctx, ip, ports, reconcilePorts) })
}

func (r *masterCountReconciler) reconcile(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort, reconcilePorts bool) error {
	cur, err := r.get(ctx)
	if err != nil {
		return err
	}
	ips, formatOK, portsOK := addrsOf(cur, ports, reconcilePorts)
	if !formatOK {
		// Not in the shape we write: start over with ourselves.
		return r.write(ctx, cur, []netip.Addr{ip}, ports)
	}
	if !reconcilePorts && len(cur.Subsets[0].Ports) > 0 {
		ports = cur.Subsets[0].Ports
	}
	if slices.Contains(ips, ip) && portsOK && len(ips) <= r.count && hasSkipMirror(cur) {
		// Keep the slice in step even when the Endpoints are right.
		return r.writeSlice(ctx, cur)
	}
	if !slices.Contains(ips, ip) {
		ips = append(ips, ip)
	}
	return r.write(ctx, cur, trim(ips, ip, r.count), ports)
}

// trim drops, while there are more than count addresses, the one sorting
// right after own (wrapping around).
func trim(ips []netip.Addr, own netip.Addr, count int) []netip.Addr {
	ips = slices.Clone(ips)
	sortAddrs(ips)
	i := slices.Index(ips, own)
	for len(ips) > count && i >= 0 {
		remove := (i + 1) % len(ips)
		ips = slices.Delete(ips, remove, remove+1)
		if remove < i {
			i--
		}
	}
	return ips
}

func (r *masterCountReconciler) RemoveEndpoints(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort) (removed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err = onConflict(func() error {
		removed, err = r.remove(ctx, ip, ports)
		return err
	})
	return removed, err
}

func (r *masterCountReconciler) remove(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort) (bool, error) {
	cur, err := r.get(ctx)
	if err != nil || cur == nil {
		return false, err
	}
	// Whatever their shape, the endpoints must lose ip.
	ips := allAddrs(cur)
	if !slices.Contains(ips, ip) {
		return false, nil
	}
	if len(cur.Subsets) > 0 && len(cur.Subsets[0].Ports) > 0 {
		ports = cur.Subsets[0].Ports
	}
	return true, r.write(ctx, cur, slices.DeleteFunc(ips, func(a netip.Addr) bool { return a == ip }), ports)
}

func (r *masterCountReconciler) StopReconciling()         { r.stopped.Store(true) }
func (r *masterCountReconciler) Changed() <-chan struct{} { return nil }
func (r *masterCountReconciler) Destroy()                 {}
