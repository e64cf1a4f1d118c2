package reconcilers

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// Defaults of the lease reconciler. kube-apiserver uses a 15 s TTL and a
// 10 s interval, and so keeps a crashed apiserver listed for up to ~25 s;
// with keep-alives every TTL/3 and a watch on the keys, kubeboot's defaults
// drop it within about 3.5 s of its death.
const (
	DefaultLeaseTTL          = 3 * time.Second
	DefaultReconcileInterval = time.Second
)

// ErrNoLeases: refusing to erase every endpoint because no lease was
// listed (more likely a storage problem than every apiserver gone).
var ErrNoLeases = errors.New("no API server IP addresses were listed in storage, refusing to erase all endpoints for the kubernetes Service")

// leaseReconciler lists exactly the apiservers that hold a live lease.
type leaseReconciler struct {
	adapter
	leases  *leases
	changed chan struct{}
	mu      sync.Mutex
	stopped atomic.Bool

	watchOnce   sync.Once
	watchCancel context.CancelFunc
}

// NewLease returns the lease reconciler. Keys live under
// <storagePrefix>/masterleases/ with the given TTL; values are encoded
// with encoder (the storage codec of core/v1 Endpoints).
func NewLease(client kubernetes.Interface, etcd *clientv3.Client, storagePrefix string, ttl time.Duration, encoder runtime.Encoder) EndpointReconciler {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return &leaseReconciler{
		adapter: adapter{client: client},
		leases:  newLeases(etcd, storagePrefix, ttl, encoder),
		changed: make(chan struct{}, 1),
	}
}

func (r *leaseReconciler) ReconcileEndpoints(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort, reconcilePorts bool) error {
	if r.stopped.Load() {
		return nil
	}
	r.startWatch()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.leases.hold(ctx, ip); err != nil {
		return err
	}
	return onConflict(func() error { return r.reconcile(ctx, ip, ports, reconcilePorts, false) })
}

// reconcile writes the live apiservers into the endpoints. allowEmpty lets
// a stopping apiserver remove the last address.
func (r *leaseReconciler) reconcile(ctx context.Context, own netip.Addr, ports []corev1.EndpointPort, reconcilePorts, allowEmpty bool) error {
	live, err := r.leases.list(ctx)
	if err != nil {
		return err
	}
	if own.IsValid() && !slices.Contains(live, own) {
		// Our key is gone though our lease lives (deleted by hand, or by
		// another apiserver's stale-data cleanup): write it again.
		if err := r.leases.rewrite(ctx, own); err != nil {
			return err
		}
		live = append(live, own)
	}
	if len(live) == 0 && !allowEmpty {
		return ErrNoLeases
	}
	cur, err := r.get(ctx)
	if err != nil {
		return err
	}
	have, formatOK, portsOK := addrsOf(cur, ports, reconcilePorts)
	if formatOK && !reconcilePorts && len(cur.Subsets[0].Ports) > 0 {
		ports = cur.Subsets[0].Ports
	}
	if formatOK && portsOK && sameAddrs(have, live) && hasSkipMirror(cur) {
		return r.writeSlice(ctx, cur)
	}
	return r.write(ctx, cur, live, ports)
}

func (r *leaseReconciler) RemoveEndpoints(ctx context.Context, ip netip.Addr, ports []corev1.EndpointPort) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.leases.release(ctx, ip); err != nil {
		return false, err
	}
	listed := false
	err := onConflict(func() error {
		cur, err := r.get(ctx)
		if err != nil || cur == nil {
			return err
		}
		have, _, _ := addrsOf(cur, ports, false)
		listed = listed || slices.Contains(have, ip)
		return r.reconcile(ctx, netip.Addr{}, ports, false, true)
	})
	return listed, err
}

func (r *leaseReconciler) StopReconciling() {
	r.stopped.Store(true)
}

func (r *leaseReconciler) Changed() <-chan struct{} { return r.changed }

// startWatch follows the lease keys so that an expired lease is noticed at
// once rather than at the next periodic reconcile.
func (r *leaseReconciler) startWatch() {
	r.watchOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		r.watchCancel = cancel
		go r.leases.watch(ctx, r.changed)
	})
}

func (r *leaseReconciler) Destroy() {
	r.watchOnce.Do(func() {})
	if r.watchCancel != nil {
		r.watchCancel()
	}
	r.leases.mu.Lock()
	r.leases.dropLocked()
	r.leases.mu.Unlock()
}

func sameAddrs(a, b []netip.Addr) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sortAddrs(a)
	sortAddrs(b)
	return slices.Equal(a, b)
}
