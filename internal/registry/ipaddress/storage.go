// Package ipaddress serves networking.k8s.io/v1 IPAddresses: one object per
// allocated Service IP, named by the IP and pointing at its Service.
package ipaddress

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

// NewREST returns the ipaddresses storage.
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*registry.REST, error) {
	return registry.NewStore(opts, registry.StoreConfig{
		Resource:   networkingv1.Resource("ipaddresses"),
		Singular:   "ipaddress",
		New:        func() runtime.Object { return &networkingv1.IPAddress{} },
		NewList:    func() runtime.Object { return &networkingv1.IPAddressList{} },
		Strategy:   Strategy(typer),
		Table:      printers.IPAddresses(),
		ShortNames: []string{"ip"},
	})
}

// Strategy validates IPAddresses.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*networkingv1.IPAddress] {
	return registry.NewStrategy(typer, false, registry.Hooks[*networkingv1.IPAddress]{
		OnValidate: func(_ context.Context, ip *networkingv1.IPAddress) field.ErrorList {
			return validation.ValidateIPAddress(ip)
		},
		OnValidateUpdate: func(_ context.Context, ip, old *networkingv1.IPAddress) field.ErrorList {
			return validation.ValidateIPAddressUpdate(ip, old)
		},
	})
}
