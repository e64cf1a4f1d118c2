// Package clusterip allocates Service ClusterIPs and keeps the
// allocations true to the Services: Allocator hands IPs out to upstream's
// Service registry and stores one networking.k8s.io/v1 IPAddress object
// per IP (before the Service is stored); Repair is the loop that runs
// beside it.
//
// kubeboot does not run upstream's repair controller (RepairIPAddress): it
// decides from informer caches and deletes IPAddresses by name without a
// precondition, so with several apiservers on one etcd a stale cache makes
// it delete an IPAddress another Service has just been given, and the IP
// is handed out twice (test/integration TestAllocationAcrossAPIServers
// found this). This loop decides from consistent reads and deletes only the
// object it judged, by UID precondition.
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
	"k8s.io/apimachinery/pkg/types"
	networkingclient "k8s.io/client-go/kubernetes/typed/networking/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/servicecidr"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"

	"github.com/kubeboot/kubeboot/internal/apiserver/services/repair"
)

// Repair rebuilds the truth of ClusterIP allocation from the Services: it
// creates the IPAddress of a Service IP that has none, reports IPs that
// cannot be repaired (invalid, out of range, held twice) as Warning Events
// on the Service, and deletes IPAddresses no Service holds once the same
// object was seen so on LeakSightings passes.
type Repair struct {
	services repair.Lister
	ips      networkingclient.IPAddressInterface
	ranges   []netip.Prefix
	cidrs    networkinglisters.ServiceCIDRLister
	recorder record.EventRecorder
	// leaks counts the passes each unheld IPAddress object was seen on.
	leaks map[types.UID]int
}

// NewRepair returns a repair loop. services lists core/v1 Services with a
// consistent read; an IP is in range if in one of ranges (the configured
// Service CIDRs) or of the ServiceCIDR objects cidrs lists.
func NewRepair(services repair.Lister, ips networkingclient.IPAddressInterface, ranges []netip.Prefix,
	cidrs networkinglisters.ServiceCIDRLister, recorder record.EventRecorder) *Repair {
	return &Repair{services: services, ips: ips, ranges: ranges, cidrs: cidrs, recorder: recorder, leaks: map[types.UID]int{}}
}

// RunOnce is one repair pass. It returns an error when the pass could not
// complete (the state may be partly repaired; the next pass continues).
func (r *Repair) RunOnce(ctx context.Context) error {
	start := time.Now()
	err := r.runOnce(ctx)
	repair.RepairDuration.WithLabelValues("clusterip").Observe(time.Since(start).Seconds())
	if err != nil {
		repair.ClusterIPRepairReconcileErrors.Inc()
	}
	return err
}

func (r *Repair) runOnce(ctx context.Context) error {
	// IPAddresses first: one created after this read, for a Service stored
	// before the Service list below, looks missing and its create just
	// finds it exists; one created before, for a Service not stored yet,
	// looks leaked on this pass only.
	ipList, err := r.ips.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing IPAddresses: %w", err)
	}
	svcObj, err := r.services.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	stored := make(map[string]*networkingv1.IPAddress, len(ipList.Items))
	for i := range ipList.Items {
		stored[ipList.Items[i].Name] = &ipList.Items[i]
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
	errs = append(errs, r.freeLeaks(ctx, stored, claimed))
	return errors.Join(errs...)
}

// freeLeaks deletes the allocator's IPAddresses no Service holds once the
// same object was seen unheld on LeakSightings passes: an allocation for a
// create in flight is seen at most once or twice.
func (r *Repair) freeLeaks(ctx context.Context, stored map[string]*networkingv1.IPAddress, claimed map[string]*corev1.Service) error {
	var errs []error
	leakedNow := map[types.UID]bool{}
	for name, ip := range stored {
		if ip.Labels[networkingv1.LabelManagedBy] != ipallocator.ControllerName || claimed[name] != nil {
			continue
		}
		leakedNow[ip.UID] = true
		r.leaks[ip.UID]++
		if r.leaks[ip.UID] < repair.LeakSightings {
			continue
		}
		klog.FromContext(ctx).Info("IPAddress appears to have leaked: cleaning up", "ip", name, "parent", ip.Spec.ParentRef)
		err := r.ips.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ip.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting leaked IPAddress %s: %w", name, err))
			continue
		}
		repair.ClusterIPRepairErrors.WithLabelValues("leak").Inc()
		delete(leakedNow, ip.UID)
	}
	for uid := range r.leaks {
		if !leakedNow[uid] {
			delete(r.leaks, uid)
		}
	}
	return errors.Join(errs...)
}

// checkServiceIP checks one ClusterIP of svc and repairs what it can.
func (r *Repair) checkServiceIP(ctx context.Context, svc *corev1.Service, s string, stored map[string]*networkingv1.IPAddress,
	claimed, byName map[string]*corev1.Service) error {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		r.warn(svc, repair.ReasonClusterIPNotValid, "invalid", "Cluster IP %s is not a valid IP; please recreate Service", s)
		return nil
	}
	family := corev1.IPv4Protocol
	if ip.Is6() {
		family = corev1.IPv6Protocol
	}
	name := ip.String()
	if other := claimed[name]; other != nil {
		if other == svc {
			// Claimed for it when an earlier Service was found to share
			// its IP: already reported there.
			return nil
		}
		r.warn(svc, repair.ReasonClusterIPAlreadyAllocated, "duplicate", "Cluster IP [%v]:%s was assigned to multiple services; please recreate service", family, s)
		return nil
	}
	// Claimed even when out of range, so that its IPAddress is not freed
	// for another Service should the range grow back over it.
	claimed[name] = svc
	if !r.inRange(ip) {
		r.warn(svc, repair.ReasonClusterIPOutOfRange, "outOfRange", "Cluster IP [%v]: %s is not within any configured Service CIDR; please recreate service", family, s)
		return nil
	}
	cur, ok := stored[name]
	switch {
	case !ok:
		// A create in flight may have stored it since the list: only an
		// IPAddress this pass creates was really missing.
		created, err := r.create(ctx, svc, name, family)
		if created {
			r.warn(svc, repair.ReasonClusterIPNotAllocated, "repair", "Cluster IP [%v]: %s is not allocated; repairing", family, s)
		}
		return err
	case sameParent(cur.Spec.ParentRef, parentRef(svc)) && cur.Labels[networkingv1.LabelManagedBy] == ipallocator.ControllerName &&
		cur.Labels[networkingv1.LabelIPAddressFamily] == string(family):
		return nil
	}
	// The IPAddress names another owner. If that Service really holds the
	// IP, two Services share it: it cannot be repaired here.
	if ref := cur.Spec.ParentRef; ref != nil && ref.Group == "" && ref.Resource == "services" {
		if owner := byName[ref.Namespace+"/"+ref.Name]; owner != nil && owner != svc && holds(owner, name) {
			claimed[name] = owner
			r.warn(svc, repair.ReasonClusterIPAlreadyAllocated, "duplicate", "Cluster IP [%v]:%s was assigned to multiple services; please recreate service", family, s)
			return nil
		}
	}
	r.warn(svc, repair.ReasonClusterIPNotAllocated, "repair", "the ClusterIP [%v]: %s for Service %s/%s has a wrong reference; repairing", family, s, svc.Namespace, svc.Name)
	// Only the object judged above: if it changed hands since the list,
	// the delete fails and a later pass judges the new one.
	err = r.ips.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return r.unknown(svc, family, s, err)
	}
	_, err = r.create(ctx, svc, name, family)
	return err
}

// create stores the IPAddress of name for svc, as upstream's allocator
// labels it; it reports false when one already existed.
func (r *Repair) create(ctx context.Context, svc *corev1.Service, name string, family corev1.IPFamily) (bool, error) {
	obj := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(family),
				networkingv1.LabelManagedBy:       ipallocator.ControllerName,
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: parentRef(svc)},
	}
	_, err := r.ips.Create(ctx, obj, metav1.CreateOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	}
	return false, r.unknown(svc, family, name, err)
}

func (r *Repair) unknown(svc *corev1.Service, family corev1.IPFamily, ip string, err error) error {
	r.warn(svc, repair.ReasonUnknownError, "unknown", "Unable to allocate ClusterIP [%v]: %s due to an unknown error", family, ip)
	return fmt.Errorf("repairing ClusterIP %s of Service %s/%s: %w", ip, svc.Namespace, svc.Name, err)
}

func (r *Repair) warn(svc *corev1.Service, reason, metric, format string, args ...any) {
	r.recorder.Eventf(svc, corev1.EventTypeWarning, reason, format, args...)
	repair.ClusterIPRepairErrors.WithLabelValues(metric).Inc()
}

// inRange reports whether ip is in a ServiceCIDR, or in the flag's ranges,
// whose ServiceCIDR a first start may not have stored yet.
func (r *Repair) inRange(ip netip.Addr) bool {
	for _, p := range r.ranges {
		if p.Contains(ip) {
			return true
		}
	}
	return len(servicecidr.ContainsAddress(r.cidrs, ip)) > 0
}

func holds(svc *corev1.Service, ip string) bool {
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil && a.String() == ip {
			return true
		}
	}
	return false
}

// parentRef is the reference an IPAddress of svc carries, as upstream's
// allocator writes it.
func parentRef(svc *corev1.Service) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Group: "", Resource: "services", Namespace: svc.Namespace, Name: svc.Name}
}

func sameParent(a, b *networkingv1.ParentReference) bool {
	return a != nil && b != nil && *a == *b
}
