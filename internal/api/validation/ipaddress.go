package validation

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateIPAddress validates an IPAddress on create. The name is the IP in
// canonical form, so each address has exactly one object and allocation
// conflicts surface as name conflicts; spec.parentRef names the owner.
func ValidateIPAddress(ip *networkingv1.IPAddress) field.ErrorList {
	allErrs := validateObjectMeta(&ip.ObjectMeta, false, ipAddressName)
	return append(allErrs, validateParentReference(ip.Spec.ParentRef, field.NewPath("spec"))...)
}

// ValidateIPAddressUpdate validates an update of an IPAddress; the owner
// cannot change.
func ValidateIPAddressUpdate(newIP, oldIP *networkingv1.IPAddress) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newIP.ObjectMeta, &oldIP.ObjectMeta)
	return append(allErrs, validateImmutable(newIP.Spec.ParentRef, oldIP.Spec.ParentRef, field.NewPath("spec", "parentRef"))...)
}

// ipAddressName is the name rule of IPAddress objects: a strictly parsed IP
// in canonical form. Names cannot be generated, so prefix is ignored.
func ipAddressName(name string, _ bool) []string {
	var msgs []string
	for _, err := range validation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, err.Detail)
	}
	return msgs
}

func validateParentReference(ref *networkingv1.ParentReference, specPath *field.Path) field.ErrorList {
	fldPath := specPath.Child("parentRef")
	if ref == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	// The core group, used by Services, is empty, so group is optional.
	if ref.Group != "" {
		allErrs = append(allErrs, validateDNS1123Subdomain(ref.Group, fldPath.Child("group"))...)
	}
	if ref.Resource == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("resource"), ""))
	} else {
		allErrs = append(allErrs, validatePathSegment(ref.Resource, fldPath.Child("resource"))...)
	}
	if ref.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validatePathSegment(ref.Name, fldPath.Child("name"))...)
	}
	if ref.Namespace != "" {
		allErrs = append(allErrs, validatePathSegment(ref.Namespace, fldPath.Child("namespace"))...)
	}
	return allErrs
}

// validatePathSegment checks a value that ends up in a URL path.
func validatePathSegment(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range content.IsPathSegmentName(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}
