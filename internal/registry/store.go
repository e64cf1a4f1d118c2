package registry

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// Strategies is what a Store needs of a strategy.
type Strategies interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
	rest.RESTDeleteStrategy
	rest.ResetFieldsStrategy
}

// StoreConfig describes one resource's storage.
type StoreConfig struct {
	// Resource is the plural group resource, e.g. {"", "services"}.
	Resource schema.GroupResource
	// Singular is the singular name, e.g. "service".
	Singular string
	// New and NewList return empty objects of the stored type.
	New, NewList func() runtime.Object
	// Strategy creates, updates and deletes objects.
	Strategy Strategies
	// Table prints objects for kubectl get.
	Table rest.TableConvertor
	// Attrs returns labels and the fields field selectors may use.
	// Default: metadata.name and metadata.namespace.
	Attrs storage.AttrFunc
	// ShortNames and Categories are published in discovery
	// ("svc", category "all").
	ShortNames, Categories []string
}

// REST is a resource's storage with its discovery names.
type REST struct {
	*genericregistry.Store
	shortNames, categories []string
}

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return r.shortNames }

// Categories implements rest.CategoriesProvider.
func (r *REST) Categories() []string { return r.categories }

// NewStore builds the generic etcd-backed store of a resource.
func NewStore(opts generic.RESTOptionsGetter, cfg StoreConfig) (*REST, error) {
	s := &genericregistry.Store{
		NewFunc:                   cfg.New,
		NewListFunc:               cfg.NewList,
		DefaultQualifiedResource:  cfg.Resource,
		SingularQualifiedResource: schema.GroupResource{Group: cfg.Resource.Group, Resource: cfg.Singular},
		CreateStrategy:            cfg.Strategy,
		UpdateStrategy:            cfg.Strategy,
		DeleteStrategy:            cfg.Strategy,
		ResetFieldsStrategy:       cfg.Strategy,
		TableConvertor:            cfg.Table,
	}
	attrs := cfg.Attrs
	if attrs == nil {
		attrs = storage.DefaultClusterScopedAttr
		if cfg.Strategy.NamespaceScoped() {
			attrs = storage.DefaultNamespaceScopedAttr
		}
	}
	if err := s.CompleteWithOptions(&generic.StoreOptions{RESTOptions: opts, AttrFunc: attrs}); err != nil {
		return nil, fmt.Errorf("storage for %s: %w", cfg.Resource, err)
	}
	return &REST{Store: s, shortNames: cfg.ShortNames, categories: cfg.Categories}, nil
}

// StatusREST serves a resource's status subresource on a copy of its store
// with the status strategy.
type StatusREST struct {
	store *genericregistry.Store
}

// NewStatusREST returns the status subresource of main.
func NewStatusREST(main *REST, strategy Strategies) *StatusREST {
	s := *main.Store
	s.CreateStrategy = nil
	s.DeleteStrategy = nil
	s.UpdateStrategy = strategy
	s.ResetFieldsStrategy = strategy
	return &StatusREST{store: &s}
}

// New implements rest.Storage.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy implements rest.Storage; the main store owns the storage.
func (r *StatusREST) Destroy() {}

// Get implements rest.Getter.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update implements rest.Updater; only status changes are kept.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// A status write never creates the object.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields implements rest.ResetFieldsStrategy.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable implements rest.TableConvertor.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}
