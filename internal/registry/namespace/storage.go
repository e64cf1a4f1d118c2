package namespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// Storage holds the namespace resource and its subresources.
type Storage struct {
	Namespace *REST
	Status    *registry.StatusREST
	Finalize  *registry.StatusREST
}

// REST is the namespaces resource: the generic store with kube-apiserver's
// two-phase delete. It forwards verbs explicitly rather than embedding the
// store so that the store's DeleteCollection, which would skip the
// Terminating phase, is not served (kube-apiserver does not serve it either).
type REST struct {
	store *registry.REST
}

var (
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.Creater              = &REST{}
	_ rest.Updater              = &REST{}
	_ rest.GracefulDeleter      = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.ShortNamesProvider   = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.TableConvertor       = &REST{}
	_ rest.ResetFieldsStrategy  = &REST{}
)

// New implements rest.Storage.
func (r *REST) New() runtime.Object { return r.store.New() }

// Destroy implements rest.Storage.
func (r *REST) Destroy() { r.store.Destroy() }

// NewList implements rest.Lister.
func (r *REST) NewList() runtime.Object { return r.store.NewList() }

// NamespaceScoped implements rest.Scoper.
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName implements rest.SingularNameProvider.
func (r *REST) GetSingularName() string { return r.store.GetSingularName() }

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return r.store.ShortNames() }

// GetResetFields implements rest.ResetFieldsStrategy.
func (r *REST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// Get implements rest.Getter.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// List implements rest.Lister.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	return r.store.List(ctx, options)
}

// Watch implements rest.Watcher.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	return r.store.Watch(ctx, options)
}

// Create implements rest.Creater.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return r.store.Create(ctx, obj, createValidation, options)
}

// Update implements rest.Updater.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
}

// ConvertToTable implements rest.TableConvertor.
func (r *REST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// NewStorage returns the namespaces storage.
func NewStorage(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper) (*Storage, error) {
	main, err := registry.NewStore(opts, registry.StoreConfig{
		Resource:   corev1.Resource("namespaces"),
		Singular:   "namespace",
		New:        func() runtime.Object { return &corev1.Namespace{} },
		NewList:    func() runtime.Object { return &corev1.NamespaceList{} },
		Strategy:   Strategy(typer),
		Table:      printers.Namespaces(),
		Attrs:      attrs,
		ShortNames: []string{"ns"},
	})
	if err != nil {
		return nil, err
	}
	// A Terminating namespace goes away with its last finalizer, spec
	// finalizers included (the generic rule looks at metadata only).
	main.ShouldDeleteDuringUpdate = func(ctx context.Context, key string, obj, existing runtime.Object) bool {
		if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
			return false
		}
		return genericregistry.ShouldDeleteDuringUpdate(ctx, key, obj, existing)
	}
	return &Storage{
		Namespace: &REST{store: main},
		Status:    registry.NewStatusREST(main, StatusStrategy(typer)),
		Finalize:  registry.NewStatusREST(main, FinalizeStrategy(typer)),
	}, nil
}

// Delete moves an Active namespace to Terminating; it deletes a namespace
// from storage only when it is already terminating and has no finalizers.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options == nil {
		options = metav1.NewDeleteOptions(0)
	}
	// Pin the delete to the object read above unless the client asked for
	// more, so that a namespace recreated meanwhile is left alone.
	preconditions := storage.Preconditions{UID: &ns.UID}
	if options.Preconditions != nil {
		if options.Preconditions.UID != nil && *options.Preconditions.UID != ns.UID {
			return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
				fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *options.Preconditions.UID, ns.UID))
		}
		preconditions.ResourceVersion = options.Preconditions.ResourceVersion
	}

	if ns.DeletionTimestamp.IsZero() {
		if deleteValidation != nil {
			if err := deleteValidation(ctx, ns); err != nil {
				return nil, false, err
			}
		}
		key, err := r.store.KeyFunc(ctx, name)
		if err != nil {
			return nil, false, err
		}
		out := &corev1.Namespace{}
		dryRun := len(options.DryRun) > 0
		err = r.store.Storage.GuaranteedUpdate(ctx, key, out, false, &preconditions,
			storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
				cur, ok := existing.(*corev1.Namespace)
				if !ok {
					return nil, fmt.Errorf("unexpected object: %T", existing)
				}
				if cur.DeletionTimestamp.IsZero() {
					now := metav1.Now()
					cur.DeletionTimestamp = &now
					cur.DeletionGracePeriodSeconds = new(int64)
				}
				cur.Status.Phase = corev1.NamespaceTerminating
				return cur, nil
			}), dryRun, nil)
		if err != nil {
			if storage.IsNotFound(err) {
				return nil, false, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
			}
			if storage.IsConflict(err) {
				return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name, err)
			}
			return nil, false, err
		}
		return out, false, nil
	}
	// Terminating: only an empty finalizer list lets it go.
	if len(ns.Spec.Finalizers) > 0 {
		return ns, false, nil
	}
	return r.store.Delete(ctx, name, deleteValidation, options)
}
