package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateNamespace validates a Namespace on create: a DNS-1123 label name,
// no metadata.namespace, the kubernetes.io/metadata.name label (when set)
// equal to the name, and valid spec.finalizers.
func ValidateNamespace(ns *corev1.Namespace) field.ErrorList {
	allErrs := validateObjectMeta(&ns.ObjectMeta, false, apimachineryvalidation.ValidateNamespaceName)
	allErrs = append(allErrs, validateNamespaceNameLabel(ns)...)
	// kube-apiserver reports these without an index on create.
	for i := range ns.Spec.Finalizers {
		allErrs = append(allErrs, validateFinalizerName(string(ns.Spec.Finalizers[i]), field.NewPath("spec", "finalizers"))...)
	}
	return allErrs
}

// ValidateNamespaceUpdate validates an update of a Namespace's metadata and
// spec.
func ValidateNamespaceUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newNs.ObjectMeta, &oldNs.ObjectMeta)
	allErrs = append(allErrs, validateNamespaceNameLabel(newNs)...)
	// kube-apiserver's update strategy restores spec.finalizers from the
	// stored object; checking them guards against a registry that doesn't.
	allErrs = append(allErrs, validateNamespaceFinalizers(newNs)...)
	return allErrs
}

// ValidateNamespaceStatusUpdate validates an update of the status
// subresource: the phase must agree with deletionTimestamp.
func ValidateNamespaceStatusUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newNs.ObjectMeta, &oldNs.ObjectMeta)
	// "Phase" is capitalised in kube-apiserver's field path; kept for parity.
	phasePath := field.NewPath("status", "Phase")
	if newNs.DeletionTimestamp.IsZero() {
		if newNs.Status.Phase != corev1.NamespaceActive {
			allErrs = append(allErrs, field.Invalid(phasePath, newNs.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if newNs.Status.Phase != corev1.NamespaceTerminating {
		allErrs = append(allErrs, field.Invalid(phasePath, newNs.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return allErrs
}

// ValidateNamespaceFinalizeUpdate validates an update of the finalize
// subresource, the only way to change spec.finalizers.
func ValidateNamespaceFinalizeUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newNs.ObjectMeta, &oldNs.ObjectMeta)
	return append(allErrs, validateNamespaceFinalizers(newNs)...)
}

func validateNamespaceFinalizers(ns *corev1.Namespace) field.ErrorList {
	var allErrs field.ErrorList
	fldPath := field.NewPath("spec", "finalizers")
	for i := range ns.Spec.Finalizers {
		allErrs = append(allErrs, validateFinalizerName(string(ns.Spec.Finalizers[i]), fldPath.Index(i))...)
	}
	return allErrs
}

// validateNamespaceNameLabel keeps the kubernetes.io/metadata.name label,
// which selectors rely on to pick namespaces by name, equal to the name.
// Defaulting sets it; it is only absent when the name is generated, and
// the registry then adds it.
func validateNamespaceNameLabel(ns *corev1.Namespace) field.ErrorList {
	value, ok := ns.Labels[corev1.LabelMetadataName]
	if !ok || ns.Name == "" || value == ns.Name {
		return nil
	}
	return field.ErrorList{field.Invalid(metadataPath().Child("labels").Key(corev1.LabelMetadataName), value, fmt.Sprintf("must be '%s'", ns.Name))}
}
