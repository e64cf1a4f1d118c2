package kubecontrollermanager

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/controller-manager/pkg/informerfactory"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"

	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

// instances numbers the controller contexts of this process, whose
// informer names must differ (they label client-go's informer metrics).
var instances atomic.Int64

// newControllerContext is what upstream's CreateControllerContext builds,
// for a controller manager that may not be the process's only one:
// upstream's registers the process-wide informer name
// "kube-controller-manager" and never releases it, so a second context in
// one process fails. Here the first context of a process is named as
// upstream's, later ones get a number, and release returns the name.
// Its informers share their Pods and Nodes with the process's other
// components through sharedObjects, and are started with ctx by start. Everything else is upstream's:
// informers without managed fields, the metadata informers, a discovery
// REST mapper reset every 30 s, the garbage collector's dependency graph
// when it runs.
func newControllerContext(ctx context.Context, c *kcmconfig.CompletedConfig, root, builder clientbuilder.ControllerClientBuilder,
	sharedObjects *sharedobjects.Pool) (_ cmapp.ControllerContext, _ contextInformers, err error) {
	client, err := root.Client("shared-informers")
	if err != nil {
		return cmapp.ControllerContext{}, contextInformers{}, err
	}
	name := "kube-controller-manager"
	if n := instances.Add(1); n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	informerName, err := cache.NewInformerName(name)
	if err != nil {
		return cmapp.ControllerContext{}, contextInformers{}, err
	}
	defer func() {
		if err != nil {
			informerName.Release()
		}
	}()
	resync := cmapp.ResyncPeriod(c)
	typed := informers.NewSharedInformerFactoryWithOptions(client, resync(), informers.WithTransform(sharedObjects.Transform),
		informers.WithInformerName(informerName))
	metadataConfig, err := root.Config("metadata-informers")
	if err != nil {
		return cmapp.ControllerContext{}, contextInformers{}, err
	}
	metadataClient, err := metadata.NewForConfig(metadataConfig)
	if err != nil {
		return cmapp.ControllerContext{}, contextInformers{}, err
	}
	metadataInformers := metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, resync(), metadatainformer.WithTransform(sharedObjects.Transform))
	discovery, err := root.DiscoveryClient("controller-discovery")
	if err != nil {
		return cmapp.ControllerContext{}, contextInformers{}, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery))
	go wait.Until(mapper.Reset, 30*time.Second, ctx.Done())

	cctx := cmapp.ControllerContext{
		ClientBuilder:                   builder,
		InformerFactory:                 typed,
		ObjectOrMetadataInformerFactory: informerfactory.NewInformerFactory(typed, metadataInformers),
		ComponentConfig:                 c.ComponentConfig,
		RESTMapper:                      mapper,
		InformersStarted:                make(chan struct{}),
		ResyncPeriod:                    resync,
		ControllerManagerMetrics:        controllersmetrics.NewControllerManagerMetrics("kube-controller-manager"),
	}
	gc := c.ComponentConfig.GarbageCollectorController
	if gc.EnableGarbageCollector && cctx.IsControllerEnabled(cmapp.NewControllerDescriptors()[names.GarbageCollectorController]) {
		ignored := map[schema.GroupResource]struct{}{}
		for _, r := range gc.GCIgnoredResources {
			ignored[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
		}
		cctx.GraphBuilder = garbagecollector.NewDependencyGraphBuilder(ctx, metadataClient, mapper, ignored,
			cctx.ObjectOrMetadataInformerFactory, cctx.InformersStarted)
	}
	controllersmetrics.Register()
	return cctx, contextInformers{typed: typed, metadata: metadataInformers, release: informerName.Release}, nil
}

// contextInformers are a controller context's informer factories.
type contextInformers struct {
	typed    informers.SharedInformerFactory
	metadata metadatainformer.SharedInformerFactory
	release  func() // returns the informer name
}

// start starts the informers the controllers have asked for. The typed
// ones start with ctx: the context upstream's Start(stopCh) makes of its
// channel is of a type of its own, and every context derived from one
// costs a goroutine that waits for its parent (context's
// propagateCancel), for each informer's reflector and each of its watch
// requests. The metadata factory's interface has no StartWithContext.
func (i contextInformers) start(ctx context.Context) {
	i.typed.StartWithContext(ctx)
	i.metadata.Start(ctx.Done())
}
