// Package clusterip allocates Service ClusterIPs as networking.k8s.io/v1
// IPAddress objects, one per IP, named by the IP and pointing at the
// Service, as kube-apiserver 1.33+ does. etcd's create-if-absent makes an
// allocation atomic across every apiserver sharing the cluster; an
// informer's view of existing IPAddresses only guides the choice of a free
// candidate.
package clusterip

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeboot/kubeboot/internal/allocator"
)

// ManagedBy is the value of the ipaddress.kubernetes.io/managed-by label on
// the IPAddresses this allocator creates, as upstream's.
const ManagedBy = "ipallocator.k8s.io"

// Store persists IPAddress objects (the ipaddress registry).
type Store interface {
	Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error)
	Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error)
	Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error)
}

// Known reports IPAddresses known to exist (an informer's cache); it may
// lag behind etcd.
type Known interface {
	Has(ip string) bool
}

// Allocator hands out the addresses of one Service range.
type Allocator struct {
	rng    Range
	family corev1.IPFamily
	store  Store
	known  Known

	// pending holds addresses this process is creating, which the informer
	// has not seen yet, so concurrent requests pick other candidates.
	mu      sync.Mutex
	pending map[netip.Addr]struct{}
}

// New returns an allocator for rng, persisting through store and guided
// by known (which may be nil).
func New(rng Range, store Store, known Known) *Allocator {
	family := corev1.IPv4Protocol
	if rng.Prefix().Addr().Is6() {
		family = corev1.IPv6Protocol
	}
	return &Allocator{rng: rng, family: family, store: store, known: known, pending: map[netip.Addr]struct{}{}}
}

// Family is the range's IP family.
func (a *Allocator) Family() corev1.IPFamily { return a.family }

// Range is the range handed out.
func (a *Allocator) Range() Range { return a.rng }

// Allocate reserves ip for owner. dryRun only checks that it is free.
func (a *Allocator) Allocate(ctx context.Context, ip netip.Addr, owner *corev1.Service, dryRun bool) (err error) {
	if !dryRun {
		defer a.observe("static", time.Now(), &err)
	}
	if !a.rng.InNetwork(ip) {
		return allocator.ErrNotInNetwork
	}
	if !a.rng.Contains(ip) {
		return &allocator.IPNotInRangeError{IP: ip.String(), ValidRange: a.rng.String()}
	}
	if dryRun {
		_, err := a.store.Get(clusterScoped(ctx), ip.String(), &metav1.GetOptions{})
		switch {
		case err == nil:
			return allocator.ErrAllocated
		case apierrors.IsNotFound(err):
			return nil
		default:
			return err
		}
	}
	return a.create(ctx, ip, owner)
}

// AllocateNext reserves a free address for owner, preferring the upper
// part of the range. dryRun returns a candidate without reserving it.
func (a *Allocator) AllocateNext(ctx context.Context, owner *corev1.Service, dryRun bool) (ip netip.Addr, err error) {
	if !dryRun {
		defer a.observe("dynamic", time.Now(), &err)
	}
	upper := [2]int{a.rng.first + a.rng.reserved, a.rng.last}
	lower := [2]int{a.rng.first, a.rng.first + a.rng.reserved - 1}
	for _, region := range [][2]int{upper, lower} {
		ip, err := a.allocateIn(ctx, region[0], region[1], owner, dryRun)
		if err != allocator.ErrFull {
			return ip, err
		}
	}
	return netip.Addr{}, allocator.ErrFull
}

// observe records an allocation's outcome and duration.
func (a *Allocator) observe(scope string, start time.Time, err *error) {
	cidr := a.rng.Prefix().String()
	if *err != nil {
		allocator.ClusterIPAllocationErrors.WithLabelValues(cidr, scope).Inc()
		return
	}
	allocator.ClusterIPAllocations.WithLabelValues(cidr, scope).Inc()
	allocator.ClusterIPAllocationDuration.WithLabelValues(cidr).Observe(time.Since(start).Seconds())
}

// allocateIn probes offsets from..to (inclusive) from a random start.
func (a *Allocator) allocateIn(ctx context.Context, from, to int, owner *corev1.Service, dryRun bool) (netip.Addr, error) {
	n := to - from + 1
	if n <= 0 {
		return netip.Addr{}, allocator.ErrFull
	}
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return netip.Addr{}, err
		}
		ip := a.rng.Addr(from + (start+i)%n)
		if a.taken(ip) {
			continue
		}
		if dryRun {
			return ip, nil
		}
		switch err := a.create(ctx, ip, owner); err {
		case nil:
			return ip, nil
		case allocator.ErrAllocated:
			continue
		default:
			return netip.Addr{}, err
		}
	}
	return netip.Addr{}, allocator.ErrFull
}

func (a *Allocator) taken(ip netip.Addr) bool {
	a.mu.Lock()
	_, pending := a.pending[ip]
	a.mu.Unlock()
	return pending || (a.known != nil && a.known.Has(ip.String()))
}

// create stores the IPAddress for ip; AlreadyExists means another Service
// (possibly through another apiserver) holds it.
func (a *Allocator) create(ctx context.Context, ip netip.Addr, owner *corev1.Service) error {
	a.mu.Lock()
	a.pending[ip] = struct{}{}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.pending, ip)
		a.mu.Unlock()
	}()
	obj := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: ip.String(),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(a.family),
				networkingv1.LabelManagedBy:       ManagedBy,
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: ParentRef(owner)},
	}
	_, err := a.store.Create(clusterScoped(ctx), obj, nil, &metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return allocator.ErrAllocated
	}
	if err != nil {
		return fmt.Errorf("storing IPAddress %s: %w", ip, err)
	}
	return nil
}

// Release frees ip if it is held by owner; an IP held by another Service,
// or already free, is left alone.
func (a *Allocator) Release(ctx context.Context, ip netip.Addr, owner *corev1.Service) error {
	obj, err := a.store.Get(clusterScoped(ctx), ip.String(), &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	cur := obj.(*networkingv1.IPAddress)
	if owner != nil && !sameParent(cur.Spec.ParentRef, ParentRef(owner)) {
		return nil
	}
	_, _, err = a.store.Delete(clusterScoped(ctx), ip.String(), rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Freed, or freed and taken again, meanwhile.
		return nil
	}
	return err
}

// clusterScoped is ctx for a call into the IPAddress registry, which
// needs the (empty) namespace of a cluster-scoped request whoever calls.
func clusterScoped(ctx context.Context) context.Context {
	return genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
}

// ParentRef is the reference an IPAddress of svc carries.
func ParentRef(svc *corev1.Service) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Group: "", Resource: "services", Namespace: svc.Namespace, Name: svc.Name}
}

func sameParent(a, b *networkingv1.ParentReference) bool {
	return a != nil && b != nil && a.Group == b.Group && a.Resource == b.Resource && a.Namespace == b.Namespace && a.Name == b.Name
}
