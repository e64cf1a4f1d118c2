package registry

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Hooks are what one resource adds to the generic strategy, for objects of
// type T. OnValidate and OnValidateUpdate are required; the rest optional.
type Hooks[T runtime.Object] struct {
	// OnPrepareCreate clears fields a client may not set on create.
	OnPrepareCreate func(ctx context.Context, obj T)
	// OnPrepareUpdate restores fields a client may not change on update.
	OnPrepareUpdate func(ctx context.Context, obj, old T)
	// OnValidate validates a new object.
	OnValidate func(ctx context.Context, obj T) field.ErrorList
	// OnValidateUpdate validates an update.
	OnValidateUpdate func(ctx context.Context, obj, old T) field.ErrorList
	// OnCanonicalize normalizes an object before it is stored.
	OnCanonicalize func(obj T)
	// OnWarnings returns warnings for a created or updated object (old is
	// the zero T on create).
	OnWarnings func(ctx context.Context, obj, old T) []string
}

// Strategy is the create, update and delete strategy of one resource.
type Strategy[T runtime.Object] struct {
	runtime.ObjectTyper
	names.NameGenerator
	Hooks[T]

	// Namespaced says whether objects live in a namespace.
	Namespaced bool
	// CreateOnUpdate allows an update (PUT) to create a missing object,
	// as kube-apiserver allows for services, endpoints, events and leases.
	CreateOnUpdate bool
	// Reset lists, per API version, the fields the prepare hooks reset;
	// server-side apply leaves them unowned.
	Reset map[fieldpath.APIVersion]*fieldpath.Set
}

// NewStrategy returns a strategy with the simple name generator.
func NewStrategy[T runtime.Object](typer runtime.ObjectTyper, namespaced bool, hooks Hooks[T]) Strategy[T] {
	return Strategy[T]{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, Hooks: hooks, Namespaced: namespaced}
}

// NamespaceScoped implements rest.RESTCreateStrategy.
func (s Strategy[T]) NamespaceScoped() bool { return s.Namespaced }

// AllowCreateOnUpdate implements rest.RESTUpdateStrategy.
func (s Strategy[T]) AllowCreateOnUpdate(context.Context) bool { return s.CreateOnUpdate }

// AllowUnconditionalUpdate implements rest.RESTUpdateStrategy: an update
// without a resourceVersion overwrites, as for every built-in resource.
func (s Strategy[T]) AllowUnconditionalUpdate(context.Context) bool { return true }

// PrepareForCreate implements rest.RESTCreateStrategy.
func (s Strategy[T]) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.OnPrepareCreate != nil {
		s.OnPrepareCreate(ctx, obj.(T))
	}
}

// PrepareForUpdate implements rest.RESTUpdateStrategy.
func (s Strategy[T]) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.OnPrepareUpdate != nil {
		s.OnPrepareUpdate(ctx, obj.(T), old.(T))
	}
}

// Validate implements rest.RESTCreateStrategy. A new object must not
// carry a resourceVersion (k8s.io/apiserver would refuse it later with a
// 500; it is the client's mistake).
func (s Strategy[T]) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	errs := s.OnValidate(ctx, obj.(T))
	if m, err := meta.Accessor(obj); err == nil && m.GetResourceVersion() != "" {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "resourceVersion"), m.GetResourceVersion(), "must be empty when creating an object"))
	}
	return errs
}

// ValidateUpdate implements rest.RESTUpdateStrategy.
func (s Strategy[T]) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.OnValidateUpdate(ctx, obj.(T), old.(T))
}

// WarningsOnCreate implements rest.RESTCreateStrategy.
func (s Strategy[T]) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	if s.OnWarnings == nil {
		return nil
	}
	var zero T
	return s.OnWarnings(ctx, obj.(T), zero)
}

// WarningsOnUpdate implements rest.RESTUpdateStrategy.
func (s Strategy[T]) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	if s.OnWarnings == nil {
		return nil
	}
	return s.OnWarnings(ctx, obj.(T), old.(T))
}

// Canonicalize implements rest.RESTCreateStrategy.
func (s Strategy[T]) Canonicalize(obj runtime.Object) {
	if s.OnCanonicalize != nil {
		s.OnCanonicalize(obj.(T))
	}
}

// GetResetFields implements rest.ResetFieldsStrategy.
func (s Strategy[T]) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return s.Reset
}

// ResetStatus is the reset set of a main resource with a status
// subresource: its writes never change status.
func ResetStatus(apiVersion string) map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(apiVersion): fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// ResetSpec is the reset set of a status subresource: its writes change
// only status (metadata changes are dropped by the prepare hook too).
func ResetSpec(apiVersion string) map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(apiVersion): fieldpath.NewSet(fieldpath.MakePathOrDie("spec")),
	}
}
