package validation

import (
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validLeaseStrategies are the unprefixed coordinated leader election
// strategies; others must be domain-qualified.
var validLeaseStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// ValidateLease validates a Lease on create: a DNS subdomain name and a
// sane spec.
func ValidateLease(l *coordinationv1.Lease) field.ErrorList {
	// Leases use apimachinery's metadata rules alone, as in kube-apiserver.
	allErrs := apimachineryvalidation.ValidateObjectMeta(&l.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, metadataPath())
	return append(allErrs, validateLeaseSpec(&l.Spec, field.NewPath("spec"))...)
}

// ValidateLeaseUpdate validates an update of a Lease. Holders renew by
// update, so every spec field may change.
func ValidateLeaseUpdate(newL, oldL *coordinationv1.Lease) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newL.ObjectMeta, &oldL.ObjectMeta, metadataPath())
	return append(allErrs, validateLeaseSpec(&newL.Spec, field.NewPath("spec"))...)
}

func validateLeaseSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		allErrs = append(allErrs, validateLeaseStrategy(*spec.Strategy, fldPath.Child("strategy"))...)
	}
	// A preferred holder only means something to a coordinating strategy.
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return allErrs
}

// validateLeaseStrategy checks spec.strategy. kube-apiserver reports its
// errors at spec.strategy.strategy; the path is kept for parity.
func validateLeaseStrategy(strategy coordinationv1.CoordinatedLeaseStrategy, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if !strings.Contains(string(strategy), "/") {
		if !slices.Contains(validLeaseStrategies, strategy) {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("strategy"), strategy, validLeaseStrategies))
		}
		return allErrs
	}
	for _, msg := range content.IsLabelKey(string(strategy)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("strategy"), strategy, msg))
	}
	return allErrs
}
