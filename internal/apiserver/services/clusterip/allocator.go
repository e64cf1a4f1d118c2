package clusterip

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	networkingclient "k8s.io/client-go/kubernetes/typed/networking/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"

	"github.com/kubeboot/kubeboot/internal/apiserver/services/repair"
)

// Allocator hands out the ClusterIPs of one IP family to upstream's
// Service registry, which calls it through ipallocator.Interface, from
// every ServiceCIDR of that family that is ready and not being deleted.
// Each ClusterIP is an IPAddress object named by the IP, as kube-apiserver
// 1.33+ stores it, so either server reads the other's allocations.
//
// Allocation has two steps. Allocate and AllocateNext choose an IP and
// hold it in memory; Record, which the Services storage calls with the
// Service it is about to store, creates the IPAddress objects of the IPs
// held for that Service (their parentRef names it). kube-apiserver's
// allocator does both in one call under one process-wide lock, so its
// Service creates wait for each other's etcd commits; here the choice is
// a map lookup under the lock and the commits overlap. The allocator
// knows which IPs are taken from its IPAddress informer's events, so it
// never walks all of them (upstream's counts every IPAddress twice per
// allocation, for its metrics).
//
// An IP stays held until the informer shows the object Record created, so
// it is never handed out twice by one apiserver. Another apiserver can
// take the same IP before this one's informer shows it; Record then finds
// the name taken and refuses the Service: 422 "provided IP is already
// allocated" for a requested IP, as kube-apiserver, and 409 Conflict for
// a chosen one (kube-apiserver's allocator would try the next IP). For
// collisionBackoff after that, dynamic allocation is kube-apiserver's
// (see Allocating).
type Allocator struct {
	family      api.IPFamily
	ipAddresses networkingclient.IPAddressInterface
	cidrs       networkinglisters.ServiceCIDRLister
	informers   []informerHandler
	now         func() time.Time

	mu     sync.Mutex
	rand   *rand.Rand
	ranges []cidrRange
	// taken are the IPAddress objects of the family the informer has.
	taken map[netip.Addr]types.UID
	// held are the IPs handed out and not yet in taken.
	held map[netip.Addr]*hold
	// dropped are the IPs a Service's storage dropped (the Service
	// deleted, or updated without them) that their owner is about to
	// release (see Dropped).
	dropped map[netip.Addr]drop
	// used counts taken by range, for the metrics.
	used map[netip.Prefix]int
	// syncUntil: allocation is synchronous until then (Allocating).
	syncUntil time.Time

	// exclusive is held for writing by an allocation that runs
	// synchronously, for reading by the others.
	exclusive sync.RWMutex
	// service is the Service of the synchronous allocation running, which
	// AllocateNext names in the IPAddress it creates at once.
	service *api.Service
}

// cidrRange is a ServiceCIDR range of the family; several ServiceCIDR
// objects may share it, and it is ready if one of them is.
type cidrRange struct {
	span
	ready bool
}

type informerHandler struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
}

// holdState is where a held IP's IPAddress object is.
type holdState int

const (
	chosen    holdState = iota // not created yet
	recording                  // being created by Record
	recorded                   // created, not yet seen by the informer
	refused                    // the create failed; Release ends the hold
)

type hold struct {
	state holdState
	scope string // "static" (requested) or "dynamic", as the metrics say
	since time.Time
	uid   types.UID // of the object created, when recorded
}

// drop counts the owner's releases of an IP still to come.
type drop struct {
	n     int
	since time.Time
}

// dropTTL ends a drop no release followed: the registry releases a
// dropped IP in the same request, right after the storage dropped it.
const dropTTL = 30 * time.Second

// holdTTL ends a hold that nothing ended: a request holds its IPs for at
// most its timeout (a minute), and an object created is seen by the
// informer in milliseconds.
const holdTTL = 2 * time.Minute

// collisionBackoff is how long allocation stays synchronous after Record
// found a chosen IP taken by another apiserver.
const collisionBackoff = 10 * time.Second

// requestTimeout bounds the reads and deletes of Allocate and Release,
// which ipallocator.Interface gives no context.
const requestTimeout = 30 * time.Second

var _ ipallocator.Interface = &Allocator{}

// NewAllocator returns the allocator of family, which creates and deletes
// IPAddress objects through ipAddresses. It is ready once both informers
// have synced (HasSynced); until then it answers ErrNotReady, and
// AllocateNext ErrFull, as upstream's.
func NewAllocator(family api.IPFamily, cidrs networkinginformers.ServiceCIDRInformer, ips networkinginformers.IPAddressInformer,
	ipAddresses networkingclient.IPAddressInterface) (*Allocator, error) {
	a := &Allocator{
		family: family, ipAddresses: ipAddresses, cidrs: cidrs.Lister(), now: time.Now,
		rand:  rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		taken: map[netip.Addr]types.UID{}, held: map[netip.Addr]*hold{}, dropped: map[netip.Addr]drop{},
		used: map[netip.Prefix]int{},
	}
	sync := func(any) { a.syncRanges() }
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{cidrs.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: sync, UpdateFunc: func(_, o any) { sync(o) }, DeleteFunc: sync}},
		{ips.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: a.ipAddressSeen, UpdateFunc: func(_, o any) { a.ipAddressSeen(o) },
			DeleteFunc: a.ipAddressGone}},
	} {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			a.Destroy()
			return nil, fmt.Errorf("ClusterIP allocator for %s: %w", family, err)
		}
		a.informers = append(a.informers, informerHandler{h.informer, reg})
	}
	return a, nil
}

// HasSynced reports whether the allocator has seen every ServiceCIDR and
// IPAddress of its informers' first lists.
func (a *Allocator) HasSynced() bool {
	for _, h := range a.informers {
		if !h.registration.HasSynced() {
			return false
		}
	}
	return len(a.informers) == 2
}

// Allocate holds a requested IP. It returns ErrMismatchedNetwork if no
// ready ServiceCIDR has it, ErrNotInRange for a CIDR's network or
// broadcast address, and ErrAllocated if it is held, or taken: stored, as
// the informer (or a hold whose IPAddress the informer has not shown yet)
// says and etcd confirms. The informer may not show yet that
// an IP was just released (here or through another apiserver), and a
// Service is often created again with its IP right after its delete;
// kube-apiserver's allocator, which creates the IPAddress at once, takes
// the IP then, so a read from etcd decides.
func (a *Allocator) Allocate(ip net.IP) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	addr, r, err := a.requested(ip)
	if notInRange, ok := err.(*ipallocator.ErrNotInRange); ok {
		repair.ClusterIPAllocationErrors.WithLabelValues(notInRange.ValidRange, scopeStatic).Inc()
	}
	if err != nil {
		return err
	}
	_, taken := a.taken[addr]
	h := a.held[addr]
	if taken && !a.isHeld(addr) || h != nil && h.state == recorded {
		a.mu.Unlock()
		err = a.stored(addr)
		a.mu.Lock()
		// A recorded IP whose IPAddress etcd no longer has was removed
		// behind the allocator (a test server's Reset restores etcd's
		// keys) before the informer showed it, which would end the hold
		// when it catches up.
		if err == nil && a.held[addr] == h && h != nil && h.state == recorded {
			delete(a.held, addr)
		}
	}
	if err == nil && a.isHeld(addr) {
		err = ipallocator.ErrAllocated
	}
	if err != nil {
		repair.ClusterIPAllocationErrors.WithLabelValues(r.prefix.String(), scopeStatic).Inc()
		return err
	}
	a.held[addr] = &hold{state: chosen, scope: scopeStatic, since: a.now()}
	return nil
}

// stored returns ErrAllocated if addr's IPAddress is in etcd, nil if it is
// not.
func (a *Allocator) stored(addr netip.Addr) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, err := a.ipAddresses.Get(ctx, addr.String(), metav1.GetOptions{})
	switch {
	case err == nil:
		return ipallocator.ErrAllocated
	case apierrors.IsNotFound(err):
		return nil
	default:
		return fmt.Errorf("reading IPAddress %s: %w", addr, err)
	}
}

// AllocateNext holds a free IP from the first ready ServiceCIDR that has
// one: from a random place in its upper part first, as kube-apiserver.
// During a synchronous allocation it creates the IPAddress at once.
func (a *Allocator) AllocateNext() (net.IP, error) {
	if !a.HasSynced() {
		return nil, ipallocator.ErrFull
	}
	if svc := a.service; svc != nil {
		return a.allocateNextNow(svc)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	addr, ok := a.choose(a.free)
	if !ok {
		return nil, ipallocator.ErrFull
	}
	a.held[addr] = &hold{state: chosen, scope: scopeDynamic, since: a.now()}
	return addr.AsSlice(), nil
}

// allocateNextNow allocates as kube-apiserver's allocator: it creates the
// IPAddress of the IP it chose, for svc, and tries the next IP while the
// one it chose is taken.
func (a *Allocator) allocateNextNow(svc *api.Service) (net.IP, error) {
	tried := map[netip.Addr]bool{}
	for {
		a.mu.Lock()
		addr, ok := a.choose(func(addr netip.Addr) bool { return !tried[addr] && a.free(addr) })
		if !ok {
			a.mu.Unlock()
			return nil, ipallocator.ErrFull
		}
		h := &hold{state: recording, scope: scopeDynamic, since: a.now()}
		a.held[addr] = h
		a.mu.Unlock()

		created, err := a.ipAddresses.Create(context.Background(), a.ipAddress(addr, svc), metav1.CreateOptions{})
		a.recorded(addr, h, created, err)
		if err == nil {
			return addr.AsSlice(), nil
		}
		a.mu.Lock()
		delete(a.held, addr)
		a.mu.Unlock()
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		tried[addr] = true
	}
}

// choose returns a free address of the first ready range that has one,
// free deciding; a.mu is held.
func (a *Allocator) choose(free func(netip.Addr) bool) (netip.Addr, bool) {
	for _, r := range a.ranges {
		if !r.ready {
			continue
		}
		if addr, ok := r.next(a.randN, free); ok {
			return addr, true
		}
		repair.ClusterIPAllocationErrors.WithLabelValues(r.prefix.String(), scopeDynamic).Inc()
	}
	return netip.Addr{}, false
}

// Allocating runs allocate, the registry's allocation step for svc (its
// BeginCreate or BeginUpdate). For collisionBackoff after Record found a
// chosen IP taken by another apiserver, allocations run one at a time and
// AllocateNext creates each IPAddress at once, trying the next IP while
// one is taken, as kube-apiserver's allocator always does: in a nearly
// full range, apiservers would otherwise keep choosing the same few free
// IPs and refusing Services with 409s.
func (a *Allocator) Allocating(svc *api.Service, allocate func() error) error {
	a.mu.Lock()
	synchronous := a.now().Before(a.syncUntil)
	a.mu.Unlock()
	if !synchronous {
		a.exclusive.RLock()
		defer a.exclusive.RUnlock()
		return allocate()
	}
	a.exclusive.Lock()
	defer a.exclusive.Unlock()
	a.service = svc
	defer func() { a.service = nil }()
	return allocate()
}

const (
	scopeStatic  = "static"
	scopeDynamic = "dynamic"
)

// Record creates the IPAddress objects of svc's ClusterIPs of this family
// that are held and not created yet, with svc as their parentRef. The
// Services storage calls it before it stores svc (on create, and in every
// try of an update), so a Service is never stored before its IPAddresses.
func (a *Allocator) Record(ctx context.Context, svc *api.Service) error {
	for _, ip := range svc.Spec.ClusterIPs {
		addr, err := netip.ParseAddr(ip)
		if err != nil || !a.ours(addr) {
			continue
		}
		a.mu.Lock()
		h := a.held[addr]
		if h == nil || h.state != chosen {
			a.mu.Unlock()
			continue
		}
		h.state = recording
		a.mu.Unlock()

		created, err := a.ipAddresses.Create(ctx, a.ipAddress(addr, svc), metav1.CreateOptions{})
		if released := a.recorded(addr, h, created, err); released {
			// Released while its create ran: the request gave up.
			a.delete(addr, &created.UID)
		}
		if err != nil {
			return refusal(svc, addr, h.scope, err)
		}
	}
	return nil
}

// recorded notes the outcome of the create of h's IPAddress and counts
// it. It reports whether the object was created while h had been
// released.
func (a *Allocator) recorded(addr netip.Addr, h *hold, created *networkingv1.IPAddress, err error) (released bool) {
	defer a.countAllocation(addr, h, err)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[addr] != h {
		return err == nil
	}
	if err != nil {
		h.state = refused
		if h.scope == scopeDynamic && apierrors.IsAlreadyExists(err) {
			a.syncUntil = a.now().Add(collisionBackoff)
		}
		return false
	}
	h.state, h.uid = recorded, created.UID
	if a.taken[addr] == created.UID {
		delete(a.held, addr)
	}
	return false
}

// refusal is the Service's answer to an IPAddress create that failed.
func refusal(svc *api.Service, addr netip.Addr, scope string, err error) error {
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	if scope == scopeStatic {
		// What upstream's registry answers when its allocator finds a
		// requested IP taken.
		return apierrors.NewInvalid(api.Kind("Service"), svc.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"),
			svc.Spec.ClusterIPs, fmt.Sprintf("failed to allocate IP %s: %v", addr, ipallocator.ErrAllocated))})
	}
	return &CollisionError{apierrors.NewConflict(api.Resource("services"), svc.Name,
		fmt.Errorf("ClusterIP %s was allocated by another apiserver at the same time, please try again", addr))}
}

// CollisionError refuses a Service whose ClusterIP, chosen by this
// apiserver, another apiserver stored at the same moment: a 409 for the
// client, which the Services registry tries again first.
type CollisionError struct{ *apierrors.StatusError }

func (e *CollisionError) Unwrap() error { return e.StatusError }

func (a *Allocator) ipAddress(addr netip.Addr, svc *api.Service) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: addr.String(),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(a.family),
				networkingv1.LabelManagedBy:       ipallocator.ControllerName,
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: svc.Namespace, Name: svc.Name,
		}},
	}
}

// Release frees ip. The registry calls it for two reasons and passes only
// the IP; Dropped tells them apart:
//   - its owner's: the Services storage dropped ip from a Service just
//     before (Dropped). Release deletes the IPAddress by name, as upstream
//     (the informer's UID may be stale: the object created again for the
//     same Service through another apiserver). A hold on ip is another
//     request's, taken while the informer did not show the owner's object
//     yet; it stays, and that request's Record decides.
//   - a request's undoing its own allocation: Release ends its hold and
//     deletes the object Record created for it, by UID, so that an object
//     another apiserver created meanwhile is kept; with no hold (the
//     informer has shown the object, which ended it) by name.
//
// Errors are logged, as upstream.
func (a *Allocator) Release(ip net.IP) error {
	addr, err := a.addrOf(ip)
	if err != nil {
		return nil
	}
	a.mu.Lock()
	if a.ownerReleases(addr) {
		a.mu.Unlock()
		a.delete(addr, nil)
		return nil
	}
	h := a.held[addr]
	delete(a.held, addr)
	a.mu.Unlock()
	switch {
	case h != nil && h.state != recorded:
		// Never created, or Record sees the hold gone and deletes what
		// it created.
		return nil
	case h != nil:
		a.delete(addr, &h.uid)
	default:
		a.delete(addr, nil)
	}
	return nil
}

// Dropped tells the allocator that the Services storage stored next in
// place of prev, or deleted prev if next is nil: the registry's next
// Release of each ClusterIP of prev's that next lacks is the owner's.
func (a *Allocator) Dropped(prev, next *api.Service) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ip := range prev.Spec.ClusterIPs {
		addr, err := netip.ParseAddr(ip)
		if err != nil || !a.ours(addr) || (next != nil && slices.Contains(next.Spec.ClusterIPs, ip)) {
			continue
		}
		d := a.dropped[addr]
		if a.now().Sub(d.since) > dropTTL {
			d.n = 0
		}
		a.dropped[addr] = drop{n: d.n + 1, since: a.now()}
	}
}

// ownerReleases reports whether a release of addr is its owner's, and
// counts it. a.mu is held.
func (a *Allocator) ownerReleases(addr netip.Addr) bool {
	d, ok := a.dropped[addr]
	if !ok {
		return false
	}
	if d.n <= 1 || a.now().Sub(d.since) > dropTTL {
		delete(a.dropped, addr)
	} else {
		a.dropped[addr] = drop{n: d.n - 1, since: d.since}
	}
	return a.now().Sub(d.since) <= dropTTL
}

func (a *Allocator) delete(addr netip.Addr, uid *types.UID) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var pre *metav1.Preconditions
	if uid != nil {
		pre = &metav1.Preconditions{UID: uid}
	}
	err := a.ipAddresses.Delete(ctx, addr.String(), metav1.DeleteOptions{Preconditions: pre})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("Could not release ClusterIP", "ip", addr, "err", err)
	}
}

// ForEach calls f with every IP of the family the informer shows taken.
func (a *Allocator) ForEach(f func(net.IP)) {
	a.mu.Lock()
	ips := make([]net.IP, 0, len(a.taken))
	for addr := range a.taken {
		ips = append(ips, addr.AsSlice())
	}
	a.mu.Unlock()
	for _, ip := range ips {
		f(ip)
	}
}

// CIDR is empty, as upstream's MetaAllocator's: the allocator spans every
// ServiceCIDR of its family.
func (a *Allocator) CIDR() net.IPNet { return net.IPNet{} }

// IPFamily is the allocator's family.
func (a *Allocator) IPFamily() api.IPFamily { return a.family }

// Has reports whether ip is taken or its IPAddress was created.
func (a *Allocator) Has(ip net.IP) bool {
	addr, err := a.addrOf(ip)
	if err != nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, taken := a.taken[addr]
	h := a.held[addr]
	return taken || (h != nil && h.state == recorded)
}

// Destroy stops the allocator's event handlers.
func (a *Allocator) Destroy() {
	for _, h := range a.informers {
		_ = h.informer.RemoveEventHandler(h.registration)
	}
}

// EnableMetrics registers the allocator's metrics, which are kube-apiserver's.
func (a *Allocator) EnableMetrics() { repair.RegisterMetrics() }

// DryRun returns the allocator of dry-run requests, which holds nothing and
// answers as upstream's: requested IPs are checked against the ranges only,
// and AllocateNext returns the first ready range's network address.
func (a *Allocator) DryRun() ipallocator.Interface { return dryRun{a} }

type dryRun struct{ *Allocator }

func (d dryRun) Allocate(ip net.IP) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, _, err := d.requested(ip)
	if !errors.Is(err, ipallocator.ErrMismatchedNetwork) {
		return err
	}
	// Upstream checks a dry run against one range.
	for _, r := range d.ranges {
		if r.ready {
			return &ipallocator.ErrNotInRange{IP: ip, ValidRange: r.prefix.String()}
		}
	}
	return err
}

func (d dryRun) AllocateNext() (net.IP, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.ranges {
		if r.ready {
			return r.prefix.Addr().AsSlice(), nil
		}
	}
	return nil, ipallocator.ErrFull
}

func (d dryRun) Release(net.IP) error          { return nil }
func (d dryRun) DryRun() ipallocator.Interface { return d }
func (d dryRun) Destroy()                      {}
func (d dryRun) EnableMetrics()                {}

// addrOf parses ip; an IP of the other family is a mismatched network.
func (a *Allocator) addrOf(ip net.IP) (netip.Addr, error) {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, fmt.Errorf("invalid IP %q", ip)
	}
	addr = addr.Unmap()
	if !a.ours(addr) {
		return netip.Addr{}, ipallocator.ErrMismatchedNetwork
	}
	return addr, nil
}

func (a *Allocator) ours(addr netip.Addr) bool {
	return addr.Is4() == (a.family == api.IPv4Protocol)
}

// requested parses a requested IP and finds the ready range that can hand
// it out (see rangeOf); a.mu is held.
func (a *Allocator) requested(ip net.IP) (netip.Addr, cidrRange, error) {
	addr, err := a.addrOf(ip)
	if err != nil {
		return addr, cidrRange{}, err
	}
	if !a.HasSynced() {
		return addr, cidrRange{}, ipallocator.ErrNotReady
	}
	r, err := a.rangeOf(addr, ip)
	return addr, r, err
}

// rangeOf returns a ready range that can hand out addr: ErrMismatchedNetwork
// if no ready range's CIDR has it, ErrNotInRange if addr is only a CIDR's
// network or broadcast address. a.mu is held.
func (a *Allocator) rangeOf(addr netip.Addr, ip net.IP) (cidrRange, error) {
	var in *cidrRange
	for i, r := range a.ranges {
		if !r.ready || !r.prefix.Contains(addr) {
			continue
		}
		if r.contains(addr) {
			return r, nil
		}
		in = &a.ranges[i]
	}
	if in == nil {
		return cidrRange{}, ipallocator.ErrMismatchedNetwork
	}
	return cidrRange{}, &ipallocator.ErrNotInRange{IP: ip, ValidRange: in.prefix.String()}
}

// free reports whether addr is neither taken nor held; a hold older than
// holdTTL ends here. a.mu is held.
func (a *Allocator) free(addr netip.Addr) bool {
	_, taken := a.taken[addr]
	return !taken && !a.isHeld(addr)
}

// isHeld reports whether addr is held; a hold older than holdTTL ends
// here. a.mu is held.
func (a *Allocator) isHeld(addr netip.Addr) bool {
	h := a.held[addr]
	if h == nil {
		return false
	}
	if a.now().Sub(h.since) > holdTTL && h.state != recording {
		delete(a.held, addr)
		return false
	}
	return true
}

// randN returns a random number in [0, n); a.mu is held.
func (a *Allocator) randN(n uint64) uint64 { return a.rand.Uint64N(n) }

func (a *Allocator) countAllocation(addr netip.Addr, h *hold, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.ranges {
		if !r.prefix.Contains(addr) {
			continue
		}
		cidr := r.prefix.String()
		if err != nil {
			repair.ClusterIPAllocationErrors.WithLabelValues(cidr, h.scope).Inc()
		} else {
			repair.ClusterIPAllocations.WithLabelValues(cidr, h.scope).Inc()
			repair.ClusterIPAllocationDuration.WithLabelValues(cidr).Observe(a.now().Sub(h.since).Seconds())
		}
		return
	}
}

// ipAddressOf is the IPAddress an informer event carries (a deleted one's
// from its tombstone) and its address, if it is of this family.
func (a *Allocator) ipAddressOf(obj any) (*networkingv1.IPAddress, netip.Addr, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	ip, ok := obj.(*networkingv1.IPAddress)
	if !ok {
		return nil, netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(ip.Name)
	if err != nil || !a.ours(addr) {
		return nil, netip.Addr{}, false
	}
	return ip, addr, true
}

// ipAddressSeen records an IPAddress the informer added or updated.
func (a *Allocator) ipAddressSeen(obj any) {
	ip, addr, ok := a.ipAddressOf(obj)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, had := a.taken[addr]; !had {
		a.count(addr, 1)
	}
	a.taken[addr] = ip.UID
	if h := a.held[addr]; h != nil && h.state == recorded && h.uid == ip.UID {
		delete(a.held, addr)
	}
}

// ipAddressGone records an IPAddress the informer deleted.
func (a *Allocator) ipAddressGone(obj any) {
	ip, addr, ok := a.ipAddressOf(obj)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if uid, had := a.taken[addr]; had && uid == ip.UID {
		delete(a.taken, addr)
		a.count(addr, -1)
	}
	if h := a.held[addr]; h != nil && h.state == recorded && h.uid == ip.UID {
		delete(a.held, addr)
	}
}

// syncRanges rebuilds the ranges from the ServiceCIDRs the informer has.
func (a *Allocator) syncRanges() {
	objs, err := a.cidrs.List(labels.Everything())
	if err != nil {
		return
	}
	ready := map[netip.Prefix]bool{}
	for _, o := range objs {
		ok := isReady(o) && o.DeletionTimestamp == nil
		for _, c := range o.Spec.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil || !a.ours(p.Addr()) {
				continue
			}
			ready[p.Masked()] = ready[p.Masked()] || ok
		}
	}
	ranges := make([]cidrRange, 0, len(ready))
	for p, ok := range ready {
		if s, valid := newSpan(p); valid {
			ranges = append(ranges, cidrRange{span: s, ready: ok})
		}
	}
	slices.SortFunc(ranges, func(x, y cidrRange) int {
		if c := x.prefix.Addr().Compare(y.prefix.Addr()); c != 0 {
			return c
		}
		return x.prefix.Bits() - y.prefix.Bits()
	})

	a.mu.Lock()
	defer a.mu.Unlock()
	a.ranges = ranges
	clear(a.used)
	for addr := range a.taken {
		a.count(addr, 1)
	}
	for _, r := range ranges {
		a.setGauges(r)
	}
}

// count adds d to the used count of every range with addr. a.mu is held.
func (a *Allocator) count(addr netip.Addr, d int) {
	for _, r := range a.ranges {
		if r.prefix.Contains(addr) {
			a.used[r.prefix] += d
			a.setGauges(r)
		}
	}
}

func (a *Allocator) setGauges(r cidrRange) {
	cidr, used := r.prefix.String(), a.used[r.prefix]
	repair.ClusterIPAllocated.WithLabelValues(cidr).Set(float64(used))
	repair.ClusterIPAvailable.WithLabelValues(cidr).Set(float64(r.size) - float64(used))
}

// isReady reports a ServiceCIDR's Ready condition; without one it is
// ready, as upstream assumes (no controller may have set it yet).
func isReady(c *networkingv1.ServiceCIDR) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == networkingv1.ServiceCIDRConditionReady {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return true
}
