package validation

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxDataSize caps the data of a ConfigMap or Secret (1 MiB), keeping
// objects well under etcd's request limit.
const maxDataSize = corev1.MaxSecretSize

// ValidateConfigMap validates a ConfigMap on create: a DNS subdomain name,
// valid keys, no key in both data and binaryData, and at most 1 MiB of
// values.
func ValidateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	allErrs := validateObjectMeta(&cm.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	dataPath, binaryPath := field.NewPath("data"), field.NewPath("binaryData")
	total := 0
	for key, value := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(dataPath.Key(key), key, msg))
		}
		// Both end up as files of one volume, so a key may appear once.
		if _, dup := cm.BinaryData[key]; dup {
			allErrs = append(allErrs, field.Invalid(dataPath.Key(key), key, "duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(binaryPath.Key(key), key, msg))
		}
		total += len(value)
	}
	if total > maxDataSize {
		// An empty path, as kube-apiserver: the limit is on the object.
		allErrs = append(allErrs, field.TooLong(field.NewPath(""), "", maxDataSize))
	}
	return allErrs
}

// ValidateConfigMapUpdate validates an update of a ConfigMap. Once
// immutable is true, data and binaryData are frozen and immutable cannot be
// unset: consumers may cache the content for good.
func ValidateConfigMapUpdate(newCm, oldCm *corev1.ConfigMap) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newCm.ObjectMeta, &oldCm.ObjectMeta)
	if isTrue(oldCm.Immutable) {
		if !isTrue(newCm.Immutable) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !sameMap(newCm.Data, oldCm.Data) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !sameMap(newCm.BinaryData, oldCm.BinaryData) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(allErrs, ValidateConfigMap(newCm)...)
}

func isTrue(b *bool) bool { return b != nil && *b }

// sameMap compares maps treating nil and empty as equal, since JSON
// clients and storage round trips do not keep the difference.
func sameMap[V any](a, b map[string]V) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
