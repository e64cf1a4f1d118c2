package validation

import (
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateSecret validates a Secret on create: a DNS subdomain name, valid
// keys, at most 1 MiB of data, and the keys its type requires.
//
// stringData is write-only input merged over data; kube-apiserver merges it
// while decoding and so reports its keys under data. That is done here as
// well, whether or not the registry has merged already.
func ValidateSecret(s *corev1.Secret) field.ErrorList {
	allErrs := validateObjectMeta(&s.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	data := secretData(s)
	dataPath := field.NewPath("data")
	total := 0
	for key, value := range data {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(dataPath.Key(key), key, msg))
		}
		total += len(value)
	}
	if total > maxDataSize {
		allErrs = append(allErrs, field.TooLong(dataPath, "", maxDataSize))
	}

	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		// The token controller fills in the uid annotation and the token;
		// the account name must come from the creator.
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			allErrs = append(allErrs, field.Required(metadataPath().Child("annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		allErrs = append(allErrs, validateSecretJSON(data, corev1.DockerConfigKey, dataPath)...)
	case corev1.SecretTypeDockerConfigJson:
		allErrs = append(allErrs, validateSecretJSON(data, corev1.DockerConfigJsonKey, dataPath)...)
	case corev1.SecretTypeBasicAuth:
		// Either may be empty, but one of the two must be there.
		_, hasUser := data[corev1.BasicAuthUsernameKey]
		_, hasPassword := data[corev1.BasicAuthPasswordKey]
		if !hasUser && !hasPassword {
			allErrs = append(allErrs,
				field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(data[corev1.SSHAuthPrivateKey]) == 0 {
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := data[corev1.TLSCertKey]; !ok {
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := data[corev1.TLSPrivateKeyKey]; !ok {
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	// Opaque and custom types carry no rules.
	return allErrs
}

// ValidateSecretUpdate validates an update of a Secret. The type never
// changes; once immutable is true, data is frozen and immutable cannot be
// unset, since consumers may cache the content for good.
func ValidateSecretUpdate(newS, oldS *corev1.Secret) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta)
	allErrs = append(allErrs, validateImmutable(newS.Type, oldS.Type, field.NewPath("type"))...)
	if isTrue(oldS.Immutable) {
		if !isTrue(newS.Immutable) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !sameMap(secretData(newS), secretData(oldS)) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(allErrs, ValidateSecret(newS)...)
}

// secretData is the data a secret will hold: data with stringData merged
// over it.
func secretData(s *corev1.Secret) map[string][]byte {
	if len(s.StringData) == 0 {
		return s.Data
	}
	data := make(map[string][]byte, len(s.Data)+len(s.StringData))
	maps.Copy(data, s.Data)
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return data
}

// validateSecretJSON requires key to hold well-formed JSON, without echoing
// the secret content.
func validateSecretJSON(data map[string][]byte, key string, dataPath *field.Path) field.ErrorList {
	raw, ok := data[key]
	if !ok {
		return field.ErrorList{field.Required(dataPath.Key(key), "")}
	}
	if err := json.Unmarshal(raw, &map[string]any{}); err != nil {
		return field.ErrorList{field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error())}
	}
	return nil
}
