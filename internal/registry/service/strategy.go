package service

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// Strategy creates and updates Services through the main resource; status
// is kept as stored.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Service] {
	s := registry.NewStrategy(typer, true, registry.Hooks[*corev1.Service]{
		OnPrepareCreate: func(_ context.Context, svc *corev1.Service) {
			svc.Status = corev1.ServiceStatus{}
		},
		OnPrepareUpdate: func(_ context.Context, svc, old *corev1.Service) {
			svc.Status = old.Status
		},
		OnValidate: func(_ context.Context, svc *corev1.Service) field.ErrorList {
			return validation.ValidateService(svc)
		},
		OnValidateUpdate: func(_ context.Context, svc, old *corev1.Service) field.ErrorList {
			return validation.ValidateServiceUpdate(svc, old)
		},
	})
	s.CreateOnUpdate = true
	s.Reset = registry.ResetStatus("v1")
	return s
}

// StatusStrategy updates only a Service's status.
func StatusStrategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Service] {
	s := registry.NewStrategy(typer, true, registry.Hooks[*corev1.Service]{
		OnPrepareUpdate: func(_ context.Context, svc, old *corev1.Service) {
			svc.ObjectMeta = old.ObjectMeta
			svc.Spec = old.Spec
		},
		OnValidate: func(_ context.Context, svc *corev1.Service) field.ErrorList {
			return validation.ValidateService(svc)
		},
		OnValidateUpdate: func(_ context.Context, svc, old *corev1.Service) field.ErrorList {
			return validation.ValidateServiceStatusUpdate(svc, old)
		},
	})
	s.Reset = registry.ResetSpec("v1")
	return s
}

// attrs adds the spec.clusterIP and spec.type field selectors.
func attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil, fmt.Errorf("not a service: %T", obj)
	}
	return svc.Labels, registry.ObjectMetaFields(&svc.ObjectMeta, true, fields.Set{
		"spec.clusterIP": svc.Spec.ClusterIP,
		"spec.type":      string(svc.Spec.Type),
	}), nil
}
