package registry

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/registry/generic"
)

// ObjectMetaFields returns extra merged with the metadata.name (and, for
// namespaced objects, metadata.namespace) field selectors.
func ObjectMetaFields(m *metav1.ObjectMeta, namespaced bool, extra fields.Set) fields.Set {
	return generic.MergeFieldsSets(generic.ObjectMetaFieldsSet(m, namespaced), extra)
}
