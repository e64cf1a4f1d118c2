// Package lease serves coordination.k8s.io/v1 Leases.
package lease

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// NewREST returns the leases storage.
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*registry.REST, error) {
	return registry.NewStore(opts, registry.StoreConfig{
		Resource: coordinationv1.Resource("leases"),
		Singular: "lease",
		New:      func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:  func() runtime.Object { return &coordinationv1.LeaseList{} },
		Strategy: Strategy(typer),
		Table:    printers.Leases(),
	})
}

// Strategy validates leases; an update may create one, as upstream.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*coordinationv1.Lease] {
	s := registry.NewStrategy(typer, true, registry.Hooks[*coordinationv1.Lease]{
		OnValidate: func(_ context.Context, l *coordinationv1.Lease) field.ErrorList {
			return validation.ValidateLease(l)
		},
		OnValidateUpdate: func(_ context.Context, l, old *coordinationv1.Lease) field.ErrorList {
			return validation.ValidateLeaseUpdate(l, old)
		},
	})
	s.CreateOnUpdate = true
	return s
}
