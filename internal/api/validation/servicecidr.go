package validation

import (
	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// ValidateServiceCIDR validates a ServiceCIDR on create: a DNS subdomain
// name and one or two CIDRs, at most one per IP family, in canonical
// form.
func ValidateServiceCIDR(c *networkingv1.ServiceCIDR) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain)
	return append(allErrs, validateServiceCIDRSpec(&c.Spec, field.NewPath("spec", "cidrs"))...)
}

func validateServiceCIDRSpec(spec *networkingv1.ServiceCIDRSpec, fldPath *field.Path) field.ErrorList {
	switch n := len(spec.CIDRs); {
	case n == 0:
		return field.ErrorList{field.Required(fldPath, "at least one CIDR required")}
	case n > 2:
		return field.ErrorList{field.Invalid(fldPath, spec, "may only hold up to 2 values")}
	case n == 2:
		if dual, err := netutils.IsDualStackCIDRStrings(spec.CIDRs); err != nil || !dual {
			return field.ErrorList{field.Invalid(fldPath, spec, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64")}
		}
	}
	var allErrs field.ErrorList
	for i, cidr := range spec.CIDRs {
		allErrs = append(allErrs, validation.IsValidCIDR(fldPath.Index(i), cidr)...)
	}
	return allErrs
}

// ValidateServiceCIDRUpdate validates an update of a ServiceCIDR. Its
// ranges may not change, since allocated IPs depend on them; the one
// allowed change is adding a CIDR of the other family to a single-stack
// ServiceCIDR, which converts a cluster to dual-stack.
func ValidateServiceCIDRUpdate(newC, oldC *networkingv1.ServiceCIDR) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta)
	cidrsPath := field.NewPath("spec", "cidrs")
	oldCIDRs, newCIDRs := oldC.Spec.CIDRs, newC.Spec.CIDRs
	switch {
	case len(oldCIDRs) == len(newCIDRs):
		for i := range oldCIDRs {
			if oldCIDRs[i] != newCIDRs[i] {
				allErrs = append(allErrs, field.Invalid(cidrsPath.Index(i), newCIDRs[i], fieldImmutableErrorMsg))
			}
		}
	case len(oldCIDRs) == 1 && len(newCIDRs) == 2:
		if newCIDRs[0] != oldCIDRs[0] {
			allErrs = append(allErrs, field.Invalid(cidrsPath.Index(0), newCIDRs[0], fieldImmutableErrorMsg))
		}
		allErrs = append(allErrs, validateServiceCIDRSpec(&newC.Spec, cidrsPath)...)
	default:
		allErrs = append(allErrs, field.Invalid(cidrsPath, newCIDRs, fieldImmutableErrorMsg))
	}
	return allErrs
}

// ValidateServiceCIDRStatusUpdate validates an update of the status
// subresource; the conditions carry no rules of their own.
func ValidateServiceCIDRStatusUpdate(newC, oldC *networkingv1.ServiceCIDR) field.ErrorList {
	return validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta)
}
