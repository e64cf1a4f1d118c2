// Package secret serves core/v1 Secrets.
package secret

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// NewREST returns the secrets storage.
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*registry.REST, error) {
	return registry.NewStore(opts, registry.StoreConfig{
		Resource: corev1.Resource("secrets"),
		Singular: "secret",
		New:      func() runtime.Object { return &corev1.Secret{} },
		NewList:  func() runtime.Object { return &corev1.SecretList{} },
		Strategy: Strategy(typer),
		Table:    printers.Secrets(),
		Attrs:    attrs,
	})
}

// Strategy validates secrets.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Secret] {
	return registry.NewStrategy(typer, true, registry.Hooks[*corev1.Secret]{
		OnValidate: func(_ context.Context, s *corev1.Secret) field.ErrorList {
			return validation.ValidateSecret(s)
		},
		OnValidateUpdate: func(_ context.Context, s, old *corev1.Secret) field.ErrorList {
			return validation.ValidateSecretUpdate(s, old)
		},
	})
}

// attrs adds the "type" field selector, as kube-apiserver.
func attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return nil, nil, fmt.Errorf("not a secret: %T", obj)
	}
	return s.Labels, registry.ObjectMetaFields(&s.ObjectMeta, true, fields.Set{"type": string(s.Type)}), nil
}
