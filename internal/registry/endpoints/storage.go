// Package endpoints serves core/v1 Endpoints.
package endpoints

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

// NewREST returns the endpoints storage.
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*registry.REST, error) {
	return registry.NewStore(opts, registry.StoreConfig{
		Resource:   corev1.Resource("endpoints"),
		Singular:   "endpoints",
		New:        func() runtime.Object { return &corev1.Endpoints{} },
		NewList:    func() runtime.Object { return &corev1.EndpointsList{} },
		Strategy:   Strategy(typer),
		Table:      printers.Endpoints(),
		ShortNames: []string{"ep"},
	})
}

// Strategy validates endpoints; an update may create them, as upstream.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Endpoints] {
	s := registry.NewStrategy(typer, true, registry.Hooks[*corev1.Endpoints]{
		OnValidate: func(_ context.Context, e *corev1.Endpoints) field.ErrorList {
			return validation.ValidateEndpoints(e)
		},
		OnValidateUpdate: func(_ context.Context, e, old *corev1.Endpoints) field.ErrorList {
			return validation.ValidateEndpointsUpdate(e, old)
		},
	})
	s.CreateOnUpdate = true
	return s
}
