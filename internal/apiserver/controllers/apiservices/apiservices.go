// Package apiservices registers with the aggregator an APIService for every
// group version the server chain serves itself, as kube-apiserver does:
// the built-in groups once at start, and the served versions of every
// CustomResourceDefinition as they come and go. The APIServices are local
// (no Service): the aggregator hands their requests to its delegates.
// kube-aggregator's autoregister controller does the writing; this package
// decides what to register.
package apiservices

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"
)

// priority orders a group version in discovery, as kube-apiserver's table.
type priority struct{ group, version int32 }

// builtin are the group versions kubeboot serves itself, with
// kube-apiserver's priorities.
var builtin = map[schema.GroupVersion]priority{
	{Group: "", Version: "v1"}:                     {18000, 1},
	{Group: "events.k8s.io", Version: "v1"}:        {17750, 15},
	{Group: "networking.k8s.io", Version: "v1"}:    {17200, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}: {16700, 15},
	{Group: "coordination.k8s.io", Version: "v1"}:  {16500, 15},
	{Group: "discovery.k8s.io", Version: "v1"}:     {16200, 15},
	// apiregistration.k8s.io is the aggregator's own group: it lists it
	// itself and never has an APIService for it.
}

// Registrar is kube-aggregator's autoregister controller.
type Registrar = autoregister.AutoAPIServiceRegistration

// Name returns the APIService name of a group version: "v1." for the
// legacy group, "<version>.<group>" otherwise.
func Name(gv schema.GroupVersion) string { return gv.Version + "." + gv.Group }

func apiService(gv schema.GroupVersion, p priority) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: Name(gv)},
		Spec: apiregistrationv1.APIServiceSpec{
			Group:                gv.Group,
			Version:              gv.Version,
			GroupPriorityMinimum: p.group,
			VersionPriority:      p.version,
		},
	}
}

// RegisterBuiltin registers the built-in group versions once, at start.
func RegisterBuiltin(r Registrar) []string {
	var names []string
	for gv, p := range builtin {
		r.AddAPIServiceToSyncOnStart(apiService(gv, p))
		names = append(names, Name(gv))
	}
	return names
}

// CRDs keeps one APIService per served version of the
// CustomResourceDefinitions, dropping those no CRD serves any more.
type CRDs struct {
	registrar Registrar
	lister    cache.Indexer
	synced    cache.InformerSynced
	changed   chan struct{}
}

// NewCRDs watches CRDs through informer.
func NewCRDs(informer apiextensionsinformers.CustomResourceDefinitionInformer, r Registrar) (*CRDs, error) {
	c := &CRDs{registrar: r, lister: informer.Informer().GetIndexer(), synced: informer.Informer().HasSynced, changed: make(chan struct{}, 1)}
	poke := func(interface{}) {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o interface{}) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run syncs whenever a CRD changes, and every minute, until ctx ends.
func (c *CRDs) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	registered := sets.New[string]()
	for {
		registered = c.sync(ctx, registered)
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		case <-time.After(time.Minute):
		}
	}
}

// sync registers every served version of every CRD and removes the ones
// registered before that are no longer served.
func (c *CRDs) sync(ctx context.Context, registered sets.Set[string]) sets.Set[string] {
	want := map[string]*apiregistrationv1.APIService{}
	for _, obj := range c.lister.List() {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			if _, isBuiltin := builtin[gv]; isBuiltin {
				continue
			}
			// kube-apiserver's priorities for CRD group versions.
			want[Name(gv)] = apiService(gv, priority{1000, 100})
		}
	}
	for name, svc := range want {
		c.registrar.AddAPIServiceToSync(svc)
		if !registered.Has(name) {
			klog.FromContext(ctx).V(2).Info("Registering APIService of a CustomResourceDefinition", "apiservice", name)
		}
	}
	next := sets.New[string]()
	for name := range want {
		next.Insert(name)
	}
	for name := range registered.Difference(next) {
		c.registrar.RemoveAPIServiceToSync(name)
	}
	return next
}

// Available reports whether the APIService's Available condition is True.
func Available(svc *apiregistrationv1.APIService) bool {
	for _, c := range svc.Status.Conditions {
		if c.Type == apiregistrationv1.Available {
			return c.Status == apiregistrationv1.ConditionTrue
		}
	}
	return false
}
