package clusterip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/allocator"
)

// ListerStore is an IPAddress store that can also list.
type ListerStore interface {
	Store
	allocator.Lister
}

// Repair rebuilds the truth of ClusterIP allocation from the Services: it
// creates the IPAddress of a Service IP that has none, reports IPs that
// cannot be repaired (invalid, out of range, held twice) as Warning Events
// on the Service, and deletes IPAddresses without a Service once seen
// leaked on LeakSightings passes.
type Repair struct {
	ranges   []Range
	services allocator.Lister
	ips      ListerStore
	recorder record.EventRecorder
	// leaks counts the passes each unowned IPAddress was seen on.
	leaks map[string]int
}

// NewRepair returns a repair loop over ranges.
func NewRepair(ranges []Range, services allocator.Lister, ips ListerStore, recorder record.EventRecorder) *Repair {
	return &Repair{ranges: ranges, services: services, ips: ips, recorder: recorder, leaks: map[string]int{}}
}

// RunOnce is one repair pass. It returns an error when the pass could not
// complete (the state may be partly repaired; the next pass continues).
func (r *Repair) RunOnce(ctx context.Context) error {
	start := time.Now()
	err := r.runOnce(ctx)
	allocator.RepairDuration.WithLabelValues("clusterip").Observe(time.Since(start).Seconds())
	if err != nil {
		allocator.ClusterIPRepairReconcileErrors.Inc()
	}
	return err
}

func (r *Repair) runOnce(ctx context.Context) error {
	ctx = clusterScoped(ctx)
	// IPAddresses first: one created after this read for a Service stored
	// after the Service list below is then simply not seen this pass.
	ipObj, err := r.ips.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing IPAddresses: %w", err)
	}
	svcObj, err := r.services.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	stored := map[string]*networkingv1.IPAddress{}
	for i := range ipObj.(*networkingv1.IPAddressList).Items {
		ip := &ipObj.(*networkingv1.IPAddressList).Items[i]
		stored[ip.Name] = ip
	}
	services := svcObj.(*corev1.ServiceList).Items
	byName := make(map[string]*corev1.Service, len(services))
	for i := range services {
		byName[services[i].Namespace+"/"+services[i].Name] = &services[i]
	}

	// claimed maps each IP to the first Service seen holding it.
	claimed := make(map[string]*corev1.Service, len(services))
	var errs []error
	for i := range services {
		svc := &services[i]
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		for _, s := range svc.Spec.ClusterIPs {
			if s == "" || s == corev1.ClusterIPNone {
				continue
			}
			if err := r.checkServiceIP(ctx, svc, s, stored, claimed, byName); err != nil {
				errs = append(errs, err)
			}
		}
	}

	r.updateGauges(claimed)

	// IPAddresses that no Service holds: leaks, unless the allocation is
	// for a Service being created right now.
	leakedNow := map[string]bool{}
	for name, ip := range stored {
		if ip.Labels[networkingv1.LabelManagedBy] != ManagedBy || claimed[name] != nil {
			continue
		}
		leakedNow[name] = true
		r.leaks[name]++
		if r.leaks[name] < allocator.LeakSightings {
			continue
		}
		klog.FromContext(ctx).Info("IPAddress appears to have leaked: cleaning up", "ip", name, "parent", ip.Spec.ParentRef)
		_, _, err := r.ips.Delete(ctx, name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ip.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting leaked IPAddress %s: %w", name, err))
			continue
		}
		allocator.ClusterIPRepairErrors.WithLabelValues("leak").Inc()
		delete(r.leaks, name)
		delete(leakedNow, name)
	}
	for name := range r.leaks {
		if !leakedNow[name] {
			delete(r.leaks, name)
		}
	}
	return errors.Join(errs...)
}

// checkServiceIP checks one ClusterIP of svc and repairs what it can.
func (r *Repair) checkServiceIP(ctx context.Context, svc *corev1.Service, s string, stored map[string]*networkingv1.IPAddress,
	claimed, byName map[string]*corev1.Service) error {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		r.warn(svc, allocator.ReasonClusterIPNotValid, "invalid", "Cluster IP %s is not a valid IP; please recreate Service", s)
		return nil
	}
	family := corev1.IPv4Protocol
	if ip.Is6() {
		family = corev1.IPv6Protocol
	}
	if !r.inRange(ip) {
		r.warn(svc, allocator.ReasonClusterIPOutOfRange, "outOfRange", "Cluster IP [%v]: %s is not within any configured Service CIDR; please recreate service", family, s)
		return nil
	}
	name := ip.String()
	if other := claimed[name]; other != nil {
		r.warn(svc, allocator.ReasonClusterIPAlreadyAllocated, "duplicate", "Cluster IP [%v]:%s was assigned to multiple services; please recreate service", family, s)
		return nil
	}
	claimed[name] = svc
	cur, ok := stored[name]
	switch {
	case !ok:
		// A create in flight may have stored it since the list: only an
		// IPAddress this pass creates was really missing.
		created, err := r.create(ctx, svc, name, family)
		if created {
			r.warn(svc, allocator.ReasonClusterIPNotAllocated, "repair", "Cluster IP [%v]: %s is not allocated; repairing", family, s)
		}
		return err
	case sameParent(cur.Spec.ParentRef, ParentRef(svc)) && cur.Labels[networkingv1.LabelManagedBy] == ManagedBy &&
		cur.Labels[networkingv1.LabelIPAddressFamily] == string(family):
		return nil
	}
	// The IPAddress names another owner. If that Service really holds the
	// IP, two Services share it: it cannot be repaired here.
	if ref := cur.Spec.ParentRef; ref != nil && ref.Group == "" && ref.Resource == "services" {
		if owner := byName[ref.Namespace+"/"+ref.Name]; owner != nil && owner != svc && holds(owner, name) {
			claimed[name] = owner
			r.warn(svc, allocator.ReasonClusterIPAlreadyAllocated, "duplicate", "Cluster IP [%v]:%s was assigned to multiple services; please recreate service", family, s)
			return nil
		}
	}
	r.warn(svc, allocator.ReasonClusterIPNotAllocated, "repair", "the ClusterIP [%v]: %s for Service %s/%s has a wrong reference; repairing", family, s, svc.Namespace, svc.Name)
	_, _, err = r.ips.Delete(ctx, name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return r.unknown(svc, family, s, err)
	}
	_, err = r.create(ctx, svc, name, family)
	return err
}

// create stores the IPAddress of name for svc; it reports false when it
// already existed.
func (r *Repair) create(ctx context.Context, svc *corev1.Service, name string, family corev1.IPFamily) (bool, error) {
	obj := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(family),
				networkingv1.LabelManagedBy:       ManagedBy,
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: ParentRef(svc)},
	}
	_, err := r.ips.Create(ctx, obj, nil, &metav1.CreateOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	}
	return false, r.unknown(svc, family, name, err)
}

func (r *Repair) unknown(svc *corev1.Service, family corev1.IPFamily, ip string, err error) error {
	r.warn(svc, allocator.ReasonUnknownError, "unknown", "Unable to allocate ClusterIP [%v]: %s due to an unknown error", family, ip)
	return fmt.Errorf("repairing ClusterIP %s of Service %s/%s: %w", ip, svc.Namespace, svc.Name, err)
}

func (r *Repair) warn(svc *corev1.Service, reason, metric, format string, args ...any) {
	r.recorder.Eventf(svc, corev1.EventTypeWarning, reason, format, args...)
	allocator.ClusterIPRepairErrors.WithLabelValues(metric).Inc()
}

func (r *Repair) inRange(ip netip.Addr) bool {
	for _, rng := range r.ranges {
		if rng.Contains(ip) {
			return true
		}
	}
	return false
}

func holds(svc *corev1.Service, ip string) bool {
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil && a.String() == ip {
			return true
		}
	}
	return false
}

// updateGauges publishes, per range, how many addresses Services hold.
func (r *Repair) updateGauges(claimed map[string]*corev1.Service) {
	for _, rng := range r.ranges {
		n := 0
		for s := range claimed {
			if ip, err := netip.ParseAddr(s); err == nil && rng.Contains(ip) {
				n++
			}
		}
		cidr := rng.Prefix().String()
		allocator.ClusterIPAllocated.WithLabelValues(cidr).Set(float64(n))
		allocator.ClusterIPAvailable.WithLabelValues(cidr).Set(float64(rng.Size() - n))
	}
}
