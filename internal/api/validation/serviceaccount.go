package validation

import (
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateServiceAccount validates a ServiceAccount on create. Only the
// metadata carries rules: the name is a DNS subdomain, since it becomes part
// of the account's username (system:serviceaccount:<ns>:<name>).
func ValidateServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	return validateObjectMeta(&sa.ObjectMeta, true, apimachineryvalidation.ValidateServiceAccountName)
}

// ValidateServiceAccountUpdate validates an update of a ServiceAccount.
func ValidateServiceAccountUpdate(newSa, oldSa *corev1.ServiceAccount) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newSa.ObjectMeta, &oldSa.ObjectMeta)
	return append(allErrs, ValidateServiceAccount(newSa)...)
}
