// Package apiservices registers with the aggregator an APIService for every
// group version the server chain serves itself, as kube-apiserver does:
// the group versions its servers list once at start, and the served versions of every
// CustomResourceDefinition as they come and go. The APIServices are local
// (no Service): the aggregator hands their requests to its delegates.
// kube-aggregator's autoregister controller does the writing; this package
// decides what to register.
package apiservices

import (
	"context"
	"strings"
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
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
)

// priorities order the group versions the server chain serves in
// discovery: kube-apiserver's. The generic control plane's table is
// upstream's; kube-apiserver adds its own groups' in a table that
// cmd/kube-apiserver/app keeps unexported, so they are written here,
// with its numbers. A group version served but not in the table gets no
// APIService, as in kube-apiserver.
var priorities = func() map[schema.GroupVersion]controlplaneapiserver.APIServicePriority {
	p := controlplaneapiserver.DefaultGenericAPIServicePriorities()
	for gv, v := range map[schema.GroupVersion]controlplaneapiserver.APIServicePriority{
		{Group: "apps", Version: "v1"}:                    {Group: 17800, Version: 15},
		{Group: "autoscaling", Version: "v1"}:             {Group: 17500, Version: 15},
		{Group: "autoscaling", Version: "v2"}:             {Group: 17500, Version: 30},
		{Group: "autoscaling", Version: "v2beta1"}:        {Group: 17500, Version: 9},
		{Group: "autoscaling", Version: "v2beta2"}:        {Group: 17500, Version: 1},
		{Group: "batch", Version: "v1"}:                   {Group: 17400, Version: 15},
		{Group: "batch", Version: "v1beta1"}:              {Group: 17400, Version: 9},
		{Group: "batch", Version: "v2alpha1"}:             {Group: 17400, Version: 9},
		{Group: "networking.k8s.io", Version: "v1"}:       {Group: 17200, Version: 15},
		{Group: "networking.k8s.io", Version: "v1beta1"}:  {Group: 17200, Version: 9},
		{Group: "policy", Version: "v1"}:                  {Group: 17100, Version: 15},
		{Group: "policy", Version: "v1beta1"}:             {Group: 17100, Version: 9},
		{Group: "storage.k8s.io", Version: "v1"}:          {Group: 16800, Version: 15},
		{Group: "storage.k8s.io", Version: "v1beta1"}:     {Group: 16800, Version: 9},
		{Group: "storage.k8s.io", Version: "v1alpha1"}:    {Group: 16800, Version: 1},
		{Group: "scheduling.k8s.io", Version: "v1"}:       {Group: 16600, Version: 15},
		{Group: "scheduling.k8s.io", Version: "v1beta1"}:  {Group: 16600, Version: 9},
		{Group: "scheduling.k8s.io", Version: "v1alpha3"}: {Group: 16600, Version: 3},
		{Group: "node.k8s.io", Version: "v1"}:             {Group: 16300, Version: 15},
		{Group: "node.k8s.io", Version: "v1alpha1"}:       {Group: 16300, Version: 1},
		{Group: "node.k8s.io", Version: "v1beta1"}:        {Group: 16300, Version: 9},
		{Group: "resource.k8s.io", Version: "v1"}:         {Group: 16200, Version: 21},
		{Group: "resource.k8s.io", Version: "v1beta2"}:    {Group: 16200, Version: 15},
		{Group: "resource.k8s.io", Version: "v1beta1"}:    {Group: 16200, Version: 9},
		{Group: "resource.k8s.io", Version: "v1alpha3"}:   {Group: 16200, Version: 1},
		{Group: "lifecycle.k8s.io", Version: "v1alpha1"}:  {Group: 15700, Version: 1},
	} {
		p[gv] = v
	}
	return p
}()

// Registrar is kube-aggregator's autoregister controller.
type Registrar = autoregister.AutoAPIServiceRegistration

// Name returns the APIService name of a group version: "v1." for the
// legacy group, "<version>.<group>" otherwise.
func Name(gv schema.GroupVersion) string { return gv.Version + "." + gv.Group }

func apiService(gv schema.GroupVersion, p controlplaneapiserver.APIServicePriority) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: Name(gv)},
		Spec: apiregistrationv1.APIServiceSpec{
			Group:                gv.Group,
			Version:              gv.Version,
			GroupPriorityMinimum: p.Group,
			VersionPriority:      p.Version,
		},
	}
}

// RegisterServed registers, once at start, an APIService for each group
// version the chain behind the aggregator serves, from the paths it lists
// ("/api/v1", "/apis/GROUP/VERSION"), as kube-apiserver does; it returns
// their names. The aggregator's /apis lists the groups of the APIServices.
func RegisterServed(r Registrar, paths []string) []string {
	var names []string
	for _, path := range paths {
		var gv schema.GroupVersion
		switch parts := strings.Split(path, "/"); {
		case path == "/api/v1":
			gv = schema.GroupVersion{Version: "v1"}
		case len(parts) == 4 && parts[1] == "apis":
			gv = schema.GroupVersion{Group: parts[2], Version: parts[3]}
		default:
			continue
		}
		p, ok := priorities[gv]
		if !ok {
			// apiregistration.k8s.io is the aggregator's own group: it
			// lists it itself.
			continue
		}
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
			if _, isBuiltin := priorities[gv]; isBuiltin {
				continue
			}
			// kube-apiserver's priorities for CRD group versions.
			want[Name(gv)] = apiService(gv, controlplaneapiserver.APIServicePriority{Group: 1000, Version: 100})
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
