// Package configmap serves core/v1 ConfigMaps.
package configmap

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// NewREST returns the configmaps storage.
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*registry.REST, error) {
	return registry.NewStore(opts, registry.StoreConfig{
		Resource:   corev1.Resource("configmaps"),
		Singular:   "configmap",
		New:        func() runtime.Object { return &corev1.ConfigMap{} },
		NewList:    func() runtime.Object { return &corev1.ConfigMapList{} },
		Strategy:   Strategy(typer),
		Table:      printers.ConfigMaps(),
		ShortNames: []string{"cm"},
	})
}

// Strategy validates configmaps.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.ConfigMap] {
	return registry.NewStrategy(typer, true, registry.Hooks[*corev1.ConfigMap]{
		OnValidate: func(_ context.Context, cm *corev1.ConfigMap) field.ErrorList {
			return validation.ValidateConfigMap(cm)
		},
		OnValidateUpdate: func(_ context.Context, cm, old *corev1.ConfigMap) field.ErrorList {
			return validation.ValidateConfigMapUpdate(cm, old)
		},
	})
}
