// Package servicecidr serves networking.k8s.io/v1 ServiceCIDRs and their
// status.
package servicecidr

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// Storage holds the servicecidrs resource and its status.
type Storage struct {
	ServiceCIDR *registry.REST
	Status      *registry.StatusREST
}

// NewStorage returns the servicecidrs storage.
func NewStorage(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*Storage, error) {
	main, err := registry.NewStore(opts, registry.StoreConfig{
		Resource: networkingv1.Resource("servicecidrs"),
		Singular: "servicecidr",
		New:      func() runtime.Object { return &networkingv1.ServiceCIDR{} },
		NewList:  func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		Strategy: Strategy(typer),
		Table:    printers.ServiceCIDRs(),
	})
	if err != nil {
		return nil, err
	}
	return &Storage{ServiceCIDR: main, Status: registry.NewStatusREST(main, StatusStrategy(typer))}, nil
}

// Strategy creates and updates ServiceCIDRs; status is kept.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*networkingv1.ServiceCIDR] {
	s := registry.NewStrategy(typer, false, registry.Hooks[*networkingv1.ServiceCIDR]{
		OnPrepareCreate: func(_ context.Context, c *networkingv1.ServiceCIDR) {
			c.Status = networkingv1.ServiceCIDRStatus{}
		},
		OnPrepareUpdate: func(_ context.Context, c, old *networkingv1.ServiceCIDR) {
			c.Status = old.Status
		},
		OnValidate: func(_ context.Context, c *networkingv1.ServiceCIDR) field.ErrorList {
			return validation.ValidateServiceCIDR(c)
		},
		OnValidateUpdate: func(_ context.Context, c, old *networkingv1.ServiceCIDR) field.ErrorList {
			return validation.ValidateServiceCIDRUpdate(c, old)
		},
	})
	s.Reset = registry.ResetStatus("networking.k8s.io/v1")
	return s
}

// StatusStrategy updates only a ServiceCIDR's status.
func StatusStrategy(typer runtime.ObjectTyper) registry.Strategy[*networkingv1.ServiceCIDR] {
	s := registry.NewStrategy(typer, false, registry.Hooks[*networkingv1.ServiceCIDR]{
		OnPrepareUpdate: func(_ context.Context, c, old *networkingv1.ServiceCIDR) {
			c.ObjectMeta = old.ObjectMeta
			c.Spec = old.Spec
		},
		OnValidate: func(_ context.Context, c *networkingv1.ServiceCIDR) field.ErrorList {
			return validation.ValidateServiceCIDR(c)
		},
		OnValidateUpdate: func(_ context.Context, c, old *networkingv1.ServiceCIDR) field.ErrorList {
			return validation.ValidateServiceCIDRStatusUpdate(c, old)
		},
	})
	s.Reset = registry.ResetSpec("networking.k8s.io/v1")
	return s
}
