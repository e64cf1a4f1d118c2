package namespace

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

// Strategy creates and updates namespaces through the main resource.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Namespace] {
	s := registry.NewStrategy(typer, false, registry.Hooks[*corev1.Namespace]{
		OnPrepareCreate: func(_ context.Context, ns *corev1.Namespace) {
			ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			ensureKubernetesFinalizer(ns)
		},
		OnPrepareUpdate: func(_ context.Context, ns, old *corev1.Namespace) {
			// Finalizers change only through /finalize, status through /status.
			ns.Spec.Finalizers = old.Spec.Finalizers
			ns.Status = old.Status
		},
		OnValidate: func(_ context.Context, ns *corev1.Namespace) field.ErrorList {
			return validation.ValidateNamespace(ns)
		},
		OnValidateUpdate: func(_ context.Context, ns, old *corev1.Namespace) field.ErrorList {
			return validation.ValidateNamespaceUpdate(ns, old)
		},
		OnCanonicalize: setNameLabel,
	})
	s.Reset = registry.ResetStatus("v1")
	return s
}

// StatusStrategy updates only a namespace's status.
func StatusStrategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Namespace] {
	s := registry.NewStrategy(typer, false, registry.Hooks[*corev1.Namespace]{
		OnPrepareUpdate: func(_ context.Context, ns, old *corev1.Namespace) {
			ns.ObjectMeta = old.ObjectMeta
			ns.Spec = old.Spec
		},
		OnValidate: func(_ context.Context, ns *corev1.Namespace) field.ErrorList {
			return validation.ValidateNamespace(ns)
		},
		OnValidateUpdate: func(_ context.Context, ns, old *corev1.Namespace) field.ErrorList {
			return validation.ValidateNamespaceStatusUpdate(ns, old)
		},
	})
	s.Reset = registry.ResetSpec("v1")
	return s
}

// FinalizeStrategy updates only a namespace's spec.finalizers.
func FinalizeStrategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Namespace] {
	s := registry.NewStrategy(typer, false, registry.Hooks[*corev1.Namespace]{
		OnPrepareUpdate: func(_ context.Context, ns, old *corev1.Namespace) {
			finalizers := ns.Spec.Finalizers
			*ns = *old.DeepCopy()
			ns.Spec.Finalizers = finalizers
		},
		OnValidate: func(_ context.Context, ns *corev1.Namespace) field.ErrorList {
			return validation.ValidateNamespace(ns)
		},
		OnValidateUpdate: func(_ context.Context, ns, old *corev1.Namespace) field.ErrorList {
			return validation.ValidateNamespaceFinalizeUpdate(ns, old)
		},
	})
	s.Reset = registry.ResetStatus("v1")
	return s
}

func ensureKubernetesFinalizer(ns *corev1.Namespace) {
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

// setNameLabel keeps the immutable kubernetes.io/metadata.name label equal
// to the name, including names generated after defaulting.
func setNameLabel(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// attrs adds the status.phase field selector.
func attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, nil, fmt.Errorf("not a namespace: %T", obj)
	}
	return ns.Labels, registry.ObjectMetaFields(&ns.ObjectMeta, false, fields.Set{"status.phase": string(ns.Status.Phase)}), nil
}
