// Package serviceaccount serves core/v1 ServiceAccounts.
package serviceaccount

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

// NewREST returns the serviceaccounts storage.
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*registry.REST, error) {
	return registry.NewStore(opts, registry.StoreConfig{
		Resource:   corev1.Resource("serviceaccounts"),
		Singular:   "serviceaccount",
		New:        func() runtime.Object { return &corev1.ServiceAccount{} },
		NewList:    func() runtime.Object { return &corev1.ServiceAccountList{} },
		Strategy:   Strategy(typer),
		Table:      printers.ServiceAccounts(),
		ShortNames: []string{"sa"},
	})
}

// Strategy validates service accounts.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.ServiceAccount] {
	return registry.NewStrategy(typer, true, registry.Hooks[*corev1.ServiceAccount]{
		OnValidate: func(_ context.Context, sa *corev1.ServiceAccount) field.ErrorList {
			return validation.ValidateServiceAccount(sa)
		},
		OnValidateUpdate: func(_ context.Context, sa, old *corev1.ServiceAccount) field.ErrorList {
			return validation.ValidateServiceAccountUpdate(sa, old)
		},
	})
}
