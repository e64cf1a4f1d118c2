package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/allocator"
	"github.com/kubeboot/kubeboot/internal/api/validation"
)

// IPAllocator hands out the ClusterIPs of one IP family.
type IPAllocator interface {
	Allocate(ctx context.Context, ip netip.Addr, owner *corev1.Service, dryRun bool) error
	AllocateNext(ctx context.Context, owner *corev1.Service, dryRun bool) (netip.Addr, error)
	Release(ctx context.Context, ip netip.Addr, owner *corev1.Service) error
}

// PortAllocator hands out NodePorts. Allocate takes the wanted ports (0:
// any), all or nothing, and reports refused entries by index.
type PortAllocator interface {
	Allocate(ctx context.Context, want []int, dryRun bool) ([]int, map[int]error, error)
	Release(ctx context.Context, ports []int) error
}

// Allocators assign and free what Services hold: ClusterIPs per family and
// NodePorts.
type Allocators struct {
	ips     map[corev1.IPFamily]IPAllocator
	primary corev1.IPFamily
	ports   PortAllocator
}

// NewAllocators returns allocators for a cluster whose primary family is
// primary; ips must hold an allocator for it, and may hold one for the
// other family (dual-stack).
func NewAllocators(primary corev1.IPFamily, ips map[corev1.IPFamily]IPAllocator, ports PortAllocator) *Allocators {
	return &Allocators{ips: ips, primary: primary, ports: ports}
}

// transaction is an allocation waiting for the outcome of its write: on
// success, commit frees what the write dropped; on failure, revert frees
// what it took.
type transaction struct {
	commit []func(context.Context)
	revert []func(context.Context)
}

// Commit runs after a successful write.
func (t *transaction) Commit(ctx context.Context) {
	for _, f := range t.commit {
		f(ctx)
	}
}

// Revert runs after a failed write, in reverse order.
func (t *transaction) Revert(ctx context.Context) {
	for i := len(t.revert) - 1; i >= 0; i-- {
		t.revert[i](ctx)
	}
}

// Create assigns the ClusterIPs and NodePorts a new Service needs, filling
// them into svc.
func (a *Allocators) Create(ctx context.Context, svc *corev1.Service, dryRun bool) (*transaction, error) {
	normalizeClusterIPs(svc, nil)
	if err := a.initIPFamilies(svc, nil); err != nil {
		return nil, err
	}
	t := &transaction{}
	if needsClusterIPs(svc) {
		if err := a.allocClusterIPs(ctx, svc, 0, t, dryRun); err != nil {
			t.Revert(ctx)
			return nil, err
		}
	}
	if err := a.allocNodePorts(ctx, svc, nil, t, dryRun); err != nil {
		t.Revert(ctx)
		return nil, err
	}
	return t, nil
}

// Update assigns what an update adds (ClusterIPs when leaving
// ExternalName, a second family, NodePorts) and, on commit, frees what it
// drops. Changes of an immutable primary ClusterIP are left to validation.
func (a *Allocators) Update(ctx context.Context, svc, old *corev1.Service, dryRun bool) (*transaction, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		// Becoming ExternalName wipes the ClusterIP fields, as upstream.
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = nil, nil
	}
	normalizeClusterIPs(svc, old)
	t := &transaction{}
	if unchangedPreferDualStack(svc, old) {
		// A PreferDualStack Service is neither upgraded nor downgraded
		// because the cluster's ranges changed; only an explicit change of
		// its policy, families or IPs does that.
		if err := a.allocNodePorts(ctx, svc, old, t, dryRun); err != nil {
			t.Revert(ctx)
			return nil, err
		}
		return t, nil
	}
	if err := a.initIPFamilies(svc, old); err != nil {
		return nil, err
	}
	switch {
	case !needsClusterIPs(old) && needsClusterIPs(svc):
		if old.Spec.Type == corev1.ServiceTypeExternalName {
			if err := a.allocClusterIPs(ctx, svc, 0, t, dryRun); err != nil {
				t.Revert(ctx)
				return nil, err
			}
		}
	case needsClusterIPs(old) && !needsClusterIPs(svc):
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			a.releaseLater(t, old, familyIPs(old), dryRun)
		}
	case needsClusterIPs(old) && needsClusterIPs(svc):
		switch {
		case len(old.Spec.IPFamilies) == 1 && len(svc.Spec.IPFamilies) == 2:
			if err := a.allocClusterIPs(ctx, svc, 1, t, dryRun); err != nil {
				t.Revert(ctx)
				return nil, err
			}
		case len(old.Spec.IPFamilies) == 2 && len(svc.Spec.IPFamilies) == 1:
			a.releaseLater(t, old, familyIPs(old)[1:], dryRun)
		}
	}
	if err := a.allocNodePorts(ctx, svc, old, t, dryRun); err != nil {
		t.Revert(ctx)
		return nil, err
	}
	return t, nil
}

// Release frees everything a deleted Service held.
func (a *Allocators) Release(ctx context.Context, svc *corev1.Service) error {
	var errs []error
	if needsClusterIPs(svc) {
		for _, fip := range familyIPs(svc) {
			if alloc, ok := a.ips[fip.family]; ok {
				if err := alloc.Release(ctx, fip.ip, svc); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if ports := nodePortsOf(svc); len(ports) > 0 {
		if err := a.ports.Release(ctx, ports); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unchangedPreferDualStack reports an update of a PreferDualStack Service
// that keeps its policy, ClusterIPs and IP families as they are.
func unchangedPreferDualStack(svc, old *corev1.Service) bool {
	p, op := svc.Spec.IPFamilyPolicy, old.Spec.IPFamilyPolicy
	return p != nil && op != nil && *p == corev1.IPFamilyPolicyPreferDualStack && *op == *p &&
		needsClusterIPs(svc) == needsClusterIPs(old) &&
		slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) &&
		slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies)
}

// normalizeClusterIPs keeps clusterIP and clusterIPs[0] in step: a client
// that only knows clusterIP (or only changed it) still gets a consistent
// pair, so that validation reports the change itself.
func normalizeClusterIPs(svc, old *corev1.Service) {
	spec := &svc.Spec
	if old != nil && spec.ClusterIP != old.Spec.ClusterIP && slices.Equal(spec.ClusterIPs, old.Spec.ClusterIPs) {
		if spec.ClusterIP == "" {
			spec.ClusterIPs = nil
		} else if len(spec.ClusterIPs) > 0 {
			spec.ClusterIPs = append([]string{spec.ClusterIP}, spec.ClusterIPs[1:]...)
		} else {
			spec.ClusterIPs = []string{spec.ClusterIP}
		}
		return
	}
	if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
}

// initIPFamilies defaults ipFamilyPolicy and ipFamilies from the request
// and the cluster's families, and refuses what the cluster cannot serve.
func (a *Allocators) initIPFamilies(svc, old *corev1.Service) error {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		spec.IPFamilies, spec.IPFamilyPolicy = nil, nil
		return nil
	}
	if errs := validation.ValidateServiceClusterIPsRelatedFields(svc, old); len(errs) > 0 {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
	}
	headlessSelectorless := spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0
	if spec.IPFamilyPolicy == nil {
		p := corev1.IPFamilyPolicySingleStack
		switch {
		case old != nil && old.Spec.IPFamilyPolicy != nil:
			p = *old.Spec.IPFamilyPolicy
		case headlessSelectorless:
			// Headless services without a selector publish endpoints of
			// every family the user provides.
			p = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &p
	}
	policy := *spec.IPFamilyPolicy
	policyPath := field.NewPath("spec", "ipFamilyPolicy")
	var errs field.ErrorList

	if old != nil {
		if policy == corev1.IPFamilyPolicySingleStack {
			// Dropping to single-stack with unchanged fields is clear intent.
			if slices.Equal(spec.ClusterIPs, old.Spec.ClusterIPs) && len(spec.ClusterIPs) > 1 {
				spec.ClusterIPs = spec.ClusterIPs[:1]
			}
			if slices.Equal(spec.IPFamilies, old.Spec.IPFamilies) && len(spec.IPFamilies) > 1 {
				spec.IPFamilies = spec.IPFamilies[:1]
			}
		} else {
			if len(spec.ClusterIPs) < len(old.Spec.ClusterIPs) && len(old.Spec.ClusterIPs) == 2 && len(spec.ClusterIPs) > 0 {
				errs = append(errs, field.Invalid(policyPath, policy, "must be 'SingleStack' to release the secondary cluster IP"))
			}
			if len(spec.IPFamilies) < len(old.Spec.IPFamilies) && len(old.Spec.IPFamilies) == 2 && len(spec.IPFamilies) > 0 {
				errs = append(errs, field.Invalid(policyPath, policy, "must be 'SingleStack' to release the secondary IP family"))
			}
		}
	}
	if policy == corev1.IPFamilyPolicySingleStack {
		if len(spec.ClusterIPs) == 2 {
			errs = append(errs, field.Invalid(policyPath, policy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
		}
		if len(spec.IPFamilies) == 2 {
			errs = append(errs, field.Invalid(policyPath, policy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
		}
	}
	// Families follow the requested IPs.
	for i, ip := range spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(spec.IPFamilies) {
			continue
		}
		fam := familyOf(ip)
		if _, ok := a.ips[fam]; !ok {
			errs = append(errs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), spec.ClusterIPs, fmt.Sprintf("%s is not configured on this cluster", fam)))
			continue
		}
		spec.IPFamilies = append(spec.IPFamilies, fam)
	}
	if len(errs) > 0 {
		return invalid(svc, errs)
	}

	if headlessSelectorless {
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = []corev1.IPFamily{a.primary}
		}
		if len(spec.IPFamilies) < 2 && policy != corev1.IPFamilyPolicySingleStack {
			spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
		}
		return nil
	}
	if policy == corev1.IPFamilyPolicyRequireDualStack && len(a.ips) < 2 {
		errs = append(errs, field.Invalid(policyPath, policy, "this cluster is not configured for dual-stack services"))
	}
	for i, fam := range spec.IPFamilies {
		if _, ok := a.ips[fam]; !ok {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilies").Index(i), fam, "not configured on this cluster"))
		}
	}
	if len(errs) > 0 {
		return invalid(svc, errs)
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{a.primary}
	}
	if policy != corev1.IPFamilyPolicySingleStack && len(spec.IPFamilies) == 1 && len(a.ips) == 2 {
		spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
	}
	return nil
}

// allocClusterIPs assigns a ClusterIP to each family from index from on:
// the requested one, or the next free.
func (a *Allocators) allocClusterIPs(ctx context.Context, svc *corev1.Service, from int, t *transaction, dryRun bool) error {
	spec := &svc.Spec
	ips := make([]string, len(spec.IPFamilies))
	copy(ips, spec.ClusterIPs)
	clusterIPsPath := field.NewPath("spec", "clusterIPs")
	for i := from; i < len(spec.IPFamilies); i++ {
		alloc := a.ips[spec.IPFamilies[i]]
		var ip netip.Addr
		if ips[i] != "" {
			var err error
			if ip, err = netip.ParseAddr(ips[i]); err != nil {
				return invalid(svc, field.ErrorList{field.Invalid(clusterIPsPath.Index(i), ips[i], "must be a valid IP address")})
			}
			if err := alloc.Allocate(ctx, ip, svc, dryRun); err != nil {
				if !isAllocationError(err) {
					return apierrors.NewInternalError(fmt.Errorf("failed to allocate IP %v: %w", ip, err))
				}
				return invalid(svc, field.ErrorList{field.Invalid(clusterIPsPath, spec.ClusterIPs, fmt.Sprintf("failed to allocate IP %v: %v", ips[i], err))})
			}
		} else {
			var err error
			if ip, err = alloc.AllocateNext(ctx, svc, dryRun); err != nil {
				if !isAllocationError(err) {
					return apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: %w", err))
				}
				requested := spec.ClusterIPs
				if requested == nil {
					requested = []string{}
				}
				return invalid(svc, field.ErrorList{field.Invalid(clusterIPsPath, requested, fmt.Sprintf("failed to allocate a serviceIP: %v", err))})
			}
		}
		if !dryRun {
			t.revert = append(t.revert, func(ctx context.Context) {
				if err := alloc.Release(ctx, ip, svc); err != nil {
					klog.FromContext(ctx).Error(err, "Releasing the ClusterIP of a failed write; the repair loop will", "service", klog.KObj(svc), "ip", ip)
				}
			})
		}
		ips[i] = ip.String()
	}
	spec.ClusterIPs = ips
	spec.ClusterIP = ips[0]
	return nil
}

// releaseLater frees ips of old once the write succeeded.
func (a *Allocators) releaseLater(t *transaction, old *corev1.Service, ips []familyIP, dryRun bool) {
	if dryRun {
		return
	}
	for _, fip := range ips {
		alloc, ok := a.ips[fip.family]
		if !ok {
			continue
		}
		t.commit = append(t.commit, func(ctx context.Context) {
			if err := alloc.Release(ctx, fip.ip, old); err != nil {
				klog.FromContext(ctx).Error(err, "Releasing a dropped ClusterIP; the repair loop will", "service", klog.KObj(old), "ip", fip.ip)
			}
		})
	}
}

// allocNodePorts assigns the NodePorts (and health check NodePort) svc
// needs that old did not hold, and on commit frees those old held that svc
// no longer does. Ports with the same port number share one NodePort, as
// upstream (one NodePort for DNS over TCP and UDP).
func (a *Allocators) allocNodePorts(ctx context.Context, svc, old *corev1.Service, t *transaction, dryRun bool) error {
	held := map[int]bool{}
	if old != nil {
		for _, p := range nodePortsOf(old) {
			held[p] = true
		}
	}
	// One request per distinct NodePort to allocate; targets are the
	// fields that receive it.
	type request struct {
		path    *field.Path
		want    int
		targets []*int32
	}
	var reqs []*request
	explicit := map[int32]int32{}      // port number -> NodePort the user gave
	byNodePort := map[int32]*request{} // explicit NodePort -> its request
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort == 0 {
			continue
		}
		explicit[p.Port] = p.NodePort
		if held[int(p.NodePort)] {
			continue
		}
		if r, ok := byNodePort[p.NodePort]; ok {
			r.targets = append(r.targets, &p.NodePort)
			continue
		}
		r := &request{path: field.NewPath("spec", "ports").Index(i).Child("nodePort"), want: int(p.NodePort), targets: []*int32{&p.NodePort}}
		byNodePort[p.NodePort] = r
		reqs = append(reqs, r)
	}
	if needsNodePorts(svc) {
		byPort := map[int32]*request{}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			if np, ok := explicit[p.Port]; ok {
				p.NodePort = np
				continue
			}
			if r, ok := byPort[p.Port]; ok {
				r.targets = append(r.targets, &p.NodePort)
				continue
			}
			r := &request{path: field.NewPath("spec", "ports").Index(i).Child("nodePort"), targets: []*int32{&p.NodePort}}
			byPort[p.Port] = r
			reqs = append(reqs, r)
		}
	}
	if hc := int(svc.Spec.HealthCheckNodePort); needsHealthCheck(svc) && (hc == 0 || !held[hc]) {
		reqs = append(reqs, &request{path: field.NewPath("spec", "healthCheckNodePort"), want: hc, targets: []*int32{&svc.Spec.HealthCheckNodePort}})
	}

	if len(reqs) > 0 {
		want := make([]int, len(reqs))
		for i, r := range reqs {
			want[i] = r.want
		}
		got, refused, err := a.ports.Allocate(ctx, want, dryRun)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err))
		}
		if len(refused) > 0 {
			var errs field.ErrorList
			for i, r := range reqs {
				e, ok := refused[i]
				if !ok {
					continue
				}
				msg := e.Error()
				if r.want == 0 {
					msg = "failed to allocate a nodePort: " + msg
				}
				errs = append(errs, field.Invalid(r.path, r.want, msg))
			}
			return invalid(svc, errs)
		}
		for i, r := range reqs {
			for _, target := range r.targets {
				*target = int32(got[i])
			}
		}
		if !dryRun {
			t.revert = append(t.revert, func(ctx context.Context) {
				if err := a.ports.Release(ctx, got); err != nil {
					klog.FromContext(ctx).Error(err, "Releasing the NodePorts of a failed write; the repair loop will", "service", klog.KObj(svc))
				}
			})
		}
	}
	if old != nil && !dryRun {
		now := map[int]bool{}
		for _, p := range nodePortsOf(svc) {
			now[p] = true
		}
		var drop []int
		for p := range held {
			if !now[p] {
				drop = append(drop, p)
			}
		}
		if len(drop) > 0 {
			t.commit = append(t.commit, func(ctx context.Context) {
				if err := a.ports.Release(ctx, drop); err != nil {
					klog.FromContext(ctx).Error(err, "Releasing dropped NodePorts; the repair loop will", "service", klog.KObj(svc))
				}
			})
		}
	}
	return nil
}

type familyIP struct {
	family corev1.IPFamily
	ip     netip.Addr
}

// familyIPs lists a Service's allocated ClusterIPs with their families.
func familyIPs(svc *corev1.Service) []familyIP {
	var out []familyIP
	for _, s := range svc.Spec.ClusterIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		out = append(out, familyIP{family: familyOf(s), ip: ip})
	}
	return out
}

// nodePortsOf lists the NodePorts a Service holds, health check included.
func nodePortsOf(svc *corev1.Service) []int {
	var out []int
	seen := map[int]bool{}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !seen[int(p.NodePort)] {
			seen[int(p.NodePort)] = true
			out = append(out, int(p.NodePort))
		}
	}
	if svc.Spec.HealthCheckNodePort != 0 && !seen[int(svc.Spec.HealthCheckNodePort)] {
		out = append(out, int(svc.Spec.HealthCheckNodePort))
	}
	return out
}

func needsClusterIPs(svc *corev1.Service) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return !(len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone) && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// needsHealthCheck: LoadBalancer Services with externalTrafficPolicy Local
// get a health check NodePort.
func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func familyOf(ip string) corev1.IPFamily {
	a, err := netip.ParseAddr(ip)
	if err == nil && a.Unmap().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

func otherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

func isAllocationError(err error) bool {
	var notInRange *allocator.IPNotInRangeError
	return errors.Is(err, allocator.ErrAllocated) || errors.Is(err, allocator.ErrFull) ||
		errors.Is(err, allocator.ErrNotInNetwork) || errors.As(err, &notInRange)
}

func invalid(svc *corev1.Service, errs field.ErrorList) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
}
