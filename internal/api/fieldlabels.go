package api

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
)

// fieldLabels lists, per core/v1 kind, the field selectors kube-apiserver
// accepts beyond metadata.name and metadata.namespace.
var fieldLabels = map[string][]string{
	"Namespace": {"status.phase"},
	"Secret":    {"type"},
	"Service":   {"spec.clusterIP", "spec.type"},
	"Event": {
		"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
		"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
		"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
	},
}

func addFieldLabelConversions(s *runtime.Scheme) error {
	for kind, extra := range fieldLabels {
		allowed := sets.New("metadata.name", "metadata.namespace")
		allowed.Insert(extra...)
		if kind == "Namespace" {
			allowed.Delete("metadata.namespace")
		}
		fn := func(label, value string) (string, string, error) {
			if allowed.Has(label) {
				return label, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}
		if err := s.AddFieldLabelConversionFunc(corev1.SchemeGroupVersion.WithKind(kind), fn); err != nil {
			return err
		}
	}
	return nil
}
