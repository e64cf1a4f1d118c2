// Package endpointslice serves discovery.k8s.io/v1 EndpointSlices.
package endpointslice

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// NewREST returns the endpointslices storage.
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*registry.REST, error) {
	return registry.NewStore(opts, registry.StoreConfig{
		Resource: discoveryv1.Resource("endpointslices"),
		Singular: "endpointslice",
		New:      func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:  func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		Strategy: Strategy(typer),
		Table:    printers.EndpointSlices(),
	})
}

// Strategy validates endpoint slices and keeps metadata.generation, which
// counts changes to anything but metadata, as upstream.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*discoveryv1.EndpointSlice] {
	return registry.NewStrategy(typer, true, registry.Hooks[*discoveryv1.EndpointSlice]{
		OnPrepareCreate: func(_ context.Context, s *discoveryv1.EndpointSlice) {
			s.Generation = 1
		},
		OnPrepareUpdate: func(_ context.Context, s, old *discoveryv1.EndpointSlice) {
			s.Generation = old.Generation
			if !equality.Semantic.DeepEqual(s.Endpoints, old.Endpoints) ||
				!equality.Semantic.DeepEqual(s.Ports, old.Ports) || s.AddressType != old.AddressType {
				s.Generation = old.Generation + 1
			}
		},
		OnValidate: func(_ context.Context, s *discoveryv1.EndpointSlice) field.ErrorList {
			return validation.ValidateEndpointSlice(s)
		},
		OnValidateUpdate: func(_ context.Context, s, old *discoveryv1.EndpointSlice) field.ErrorList {
			return validation.ValidateEndpointSliceUpdate(s, old)
		},
	})
}
