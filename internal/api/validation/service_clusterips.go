package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

var (
	supportedIPFamilies       = sets.New(corev1.IPv4Protocol, corev1.IPv6Protocol)
	supportedIPFamilyPolicies = sets.New(corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)
)

// clusterIPsOf returns the service's cluster IPs: spec.clusterIPs, or
// spec.clusterIP alone when the registry has not copied it over yet.
func clusterIPsOf(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		return []string{svc.Spec.ClusterIP}
	}
	return svc.Spec.ClusterIPs
}

// isHeadlessService reports whether the service has no cluster IP
// (clusterIP "None"), so DNS returns the endpoints directly.
func isHeadlessService(svc *corev1.Service) bool {
	ips := clusterIPsOf(svc)
	return len(ips) == 1 && ips[0] == corev1.ClusterIPNone
}

// primaryClusterIPPath is where to report a bad primary cluster IP.
func primaryClusterIPPath(svc *corev1.Service) *field.Path {
	if len(svc.Spec.ClusterIPs) == 0 {
		return field.NewPath("spec", "clusterIP")
	}
	return field.NewPath("spec", "clusterIPs").Index(0)
}

// validateClusterIPsRelatedFields checks clusterIP, clusterIPs, ipFamilies
// and ipFamilyPolicy on their own and against each other. Any of them may
// still be empty: the registry fills them in while allocating.
func validateClusterIPsRelatedFields(svc, old *corev1.Service) field.ErrorList {
	// ExternalName services were checked to have none of them.
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var allErrs field.ErrorList
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	clusterIPsPath := specPath.Child("clusterIPs")
	var oldIPs []string
	if old != nil {
		oldIPs = clusterIPsOf(old)
	}

	switch {
	case spec.ClusterIP != "" && len(spec.ClusterIPs) == 0:
		// Not copied into clusterIPs yet: check the one value on its own.
		if spec.ClusterIP != corev1.ClusterIPNone {
			allErrs = append(allErrs, validateLegacyIP(specPath.Child("clusterIP"), spec.ClusterIP, oldIPs)...)
		}
		return append(allErrs, validateIPFamilyFields(spec, specPath)...)
	case spec.ClusterIP != "" && spec.ClusterIPs[0] != spec.ClusterIP:
		allErrs = append(allErrs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
	case spec.ClusterIP == "" && len(spec.ClusterIPs) != 0:
		allErrs = append(allErrs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}

	allErrs = append(allErrs, validateIPFamilyFields(spec, specPath)...)

	// Stop at malformed values: the dual-stack and family checks below
	// would only repeat them less clearly.
	hasInvalidIPs := false
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				hasInvalidIPs = true
				allErrs = append(allErrs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		errs := validateLegacyIP(clusterIPsPath.Index(i), ip, oldIPs)
		hasInvalidIPs = hasInvalidIPs || len(errs) != 0
		allErrs = append(allErrs, errs...)
	}
	if len(spec.ClusterIPs) > 2 {
		allErrs = append(allErrs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	if hasInvalidIPs {
		return allErrs
	}

	if len(spec.ClusterIPs) > 1 {
		dualStack, err := netutils.IsDualStackIPStrings(spec.ClusterIPs)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(clusterIPsPath, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		}
		if !dualStack {
			allErrs = append(allErrs, field.Invalid(clusterIPsPath, spec.ClusterIPs, "may specify no more than one IP for each IP family"))
		}
	}

	if !isHeadlessService(svc) && len(spec.IPFamilies) > 0 {
		for i, ip := range spec.ClusterIPs {
			if i >= len(spec.IPFamilies) {
				break
			}
			isIPv6 := netutils.IsIPv6String(ip)
			if spec.IPFamilies[i] == corev1.IPv4Protocol && isIPv6 {
				allErrs = append(allErrs, field.Invalid(clusterIPsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
			}
			if spec.IPFamilies[i] == corev1.IPv6Protocol && !isIPv6 {
				allErrs = append(allErrs, field.Invalid(clusterIPsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
			}
		}
	}
	return allErrs
}

// validateIPFamilyFields checks ipFamilies (known, no repeats, so two
// means dual-stack) and ipFamilyPolicy.
func validateIPFamilyFields(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	familiesPath := specPath.Child("ipFamilies")
	seen := sets.New[corev1.IPFamily]()
	for i, family := range spec.IPFamilies {
		if !supportedIPFamilies.Has(family) {
			allErrs = append(allErrs, field.NotSupported(familiesPath.Index(i), family, sets.List(supportedIPFamilies)))
		}
		if seen.Has(family) {
			allErrs = append(allErrs, field.Duplicate(familiesPath.Index(i), family))
		}
		seen.Insert(family)
	}
	if p := spec.IPFamilyPolicy; p != nil && !supportedIPFamilyPolicies.Has(*p) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("ipFamilyPolicy"), *p, sets.List(supportedIPFamilyPolicies)))
	}
	return allErrs
}

// validateUpgradeDowngradeClusterIPs lets an update add or release the
// secondary cluster IP (moving to or from dual-stack) but never change the
// primary one, unless the service becomes or stops being ExternalName or
// stays headless. The bad value reported is the whole new list, as
// kube-apiserver does.
func validateUpgradeDowngradeClusterIPs(old, svc *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if isHeadlessService(old) && isHeadlessService(svc) {
		return nil
	}
	var allErrs field.ErrorList
	oldIPs, newIPs := clusterIPsOf(old), clusterIPsOf(svc)
	primaryPath := field.NewPath("spec", "clusterIPs").Index(0)
	switch {
	case len(oldIPs) == len(newIPs):
		for i, ip := range oldIPs {
			if ip != newIPs[i] {
				allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), newIPs, "may not change once set"))
			}
		}
	case len(oldIPs) > len(newIPs):
		if len(newIPs) == 0 {
			allErrs = append(allErrs, field.Invalid(primaryPath, newIPs, "primary clusterIP can not be unset"))
		}
		if len(oldIPs) > 0 && len(newIPs) > 0 && newIPs[0] != oldIPs[0] {
			allErrs = append(allErrs, field.Invalid(primaryPath, newIPs, "may not change once set"))
		}
		// Releasing the secondary IP is a deliberate move to single-stack.
		if len(newIPs) == 1 && !isSingleStack(svc) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary clusterIP"))
		}
	default:
		if len(oldIPs) > 0 && newIPs[0] != oldIPs[0] {
			allErrs = append(allErrs, field.Invalid(primaryPath, newIPs, "may not change once set"))
		}
	}
	return allErrs
}

// validateUpgradeDowngradeIPFamilies is validateUpgradeDowngradeClusterIPs
// for ipFamilies; headless services may change families freely. Paths and
// values follow kube-apiserver's, quirks included (every mismatch is
// reported at ipFamilies[0]).
func validateUpgradeDowngradeIPFamilies(old, svc *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if isHeadlessService(old) || isHeadlessService(svc) {
		return nil
	}
	var allErrs field.ErrorList
	oldFamilies, newFamilies := old.Spec.IPFamilies, svc.Spec.IPFamilies
	primaryPath := field.NewPath("spec", "ipFamilies").Index(0)
	switch {
	case len(oldFamilies) == len(newFamilies):
		for i, family := range oldFamilies {
			if family != newFamilies[i] {
				allErrs = append(allErrs, field.Invalid(primaryPath, newFamilies, "may not change once set"))
			}
		}
	case len(oldFamilies) > len(newFamilies):
		if len(clusterIPsOf(svc)) == 0 {
			allErrs = append(allErrs, field.Invalid(primaryPath, newFamilies, "primary ipFamily can not be unset"))
		}
		if len(newFamilies) > 0 && newFamilies[0] != oldFamilies[0] {
			allErrs = append(allErrs, field.Invalid(primaryPath, svc.Spec.ClusterIPs, "may not change once set"))
		}
		if len(newFamilies) == 1 && !isSingleStack(svc) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	default:
		if len(oldFamilies) > 0 && newFamilies[0] != oldFamilies[0] {
			allErrs = append(allErrs, field.Invalid(primaryPath, svc.Spec.ClusterIPs, "may not change once set"))
		}
	}
	return allErrs
}

func isSingleStack(svc *corev1.Service) bool {
	return svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack
}

// ValidateServiceClusterIPsRelatedFields checks clusterIP, clusterIPs,
// ipFamilies and ipFamilyPolicy before the registry allocates, so that
// malformed values are refused before any allocation is attempted. old is
// nil on create.
func ValidateServiceClusterIPsRelatedFields(svc, old *corev1.Service) field.ErrorList {
	return validateClusterIPsRelatedFields(svc, old)
}
