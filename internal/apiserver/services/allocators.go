package services

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	svcreg "k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	servicestore "k8s.io/kubernetes/pkg/registry/core/service/storage"

	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/apiserver/services/clusterip"
	"github.com/kubeboot/kubeboot/internal/apiserver/services/nodeport"
	"github.com/kubeboot/kubeboot/internal/apiserver/services/repair"
	"github.com/kubeboot/kubeboot/internal/platform/network"
)

// Defaults of the repair loops, as kube-apiserver's.
const (
	DefaultRepairInterval = 3 * time.Minute
	DefaultRepairDeadline = time.Minute
)

// Config says how Services get their ClusterIPs and NodePorts.
type Config struct {
	// CIDRs are the Service ranges (--service-cluster-ip-range).
	CIDRs network.ServiceCIDRs
	// NodePorts is --service-node-port-range.
	NodePorts network.PortRange
	// RepairInterval is how often the repair loops run
	// (--service-ip-repair-interval).
	RepairInterval time.Duration
	// RepairDeadline bounds the first repair passes, which /readyz waits
	// for; past it the server exits (--service-ip-repair-deadline).
	RepairDeadline time.Duration
	// Recorder records the repair loops' Events.
	Recorder record.EventRecorder
}

// Allocators are the Service allocators, the Services registry that
// allocates through them, and their repair loops.
type Allocators struct {
	cfg        Config
	clusterIPs clusterIPAllocators
	primary    api.IPFamily

	nodePorts     *nodeport.Allocator
	nodePortStore storage.Interface

	client      kubernetes.Interface
	cidrObjects networkinglisters.ServiceCIDRLister
	destroys    []func()
	// services is the Services registry, once NewREST built it: the repair
	// loops list it.
	services *servicestore.REST
}

// NewAllocators builds the allocators cfg describes: the ClusterIP ones
// on the informers' ServiceCIDRs and IPAddresses (and client, which
// stores IPAddresses), the NodePort one on backend. Destroy releases them.
func NewAllocators(cfg Config, backend *etcdstore.Backend, client kubernetes.Interface, factory informers.SharedInformerFactory) (_ *Allocators, err error) {
	cidrInformer := factory.Networking().V1().ServiceCIDRs()
	out := &Allocators{cfg: cfg, clusterIPs: clusterIPAllocators{}, client: client, cidrObjects: cidrInformer.Lister()}
	defer func() {
		if err != nil {
			out.Destroy()
		}
	}()
	for i, p := range cfg.CIDRs.All() {
		family := api.IPv4Protocol
		if p.Addr().Is6() {
			family = api.IPv6Protocol
		}
		a, err := clusterip.NewAllocator(family, cidrInformer, factory.Networking().V1().IPAddresses(), client.NetworkingV1().IPAddresses())
		if err != nil {
			return nil, err
		}
		a.EnableMetrics()
		out.destroys = append(out.destroys, a.Destroy)
		out.clusterIPs[family] = a
		if i == 0 {
			out.primary = family
		}
	}
	raw, destroyRaw, err := backend.Raw(corev1.Resource("servicenodeportallocations"), nodeport.Key,
		func() runtime.Object { return &corev1.RangeAllocation{} }, nil)
	if err != nil {
		return nil, fmt.Errorf("node port allocation storage: %w", err)
	}
	out.nodePorts = nodeport.New(cfg.NodePorts, raw)
	out.nodePortStore = raw
	out.destroys = append(out.destroys, out.nodePorts.Close, destroyRaw)
	repair.RegisterMetrics()
	return out, nil
}

// Destroy releases the allocators.
func (a *Allocators) Destroy() {
	for _, d := range a.destroys {
		d()
	}
	a.destroys = nil
}

// NewREST builds upstream's Services registry on opts (defaulting,
// validation, IP families, the allocation transaction), allocating
// through the allocators; its storage stores a Service only once the
// IPAddresses of its ClusterIPs are stored. pods, slices and transport
// serve its proxy subresource.
func (a *Allocators) NewREST(opts generic.RESTOptionsGetter, pods servicestore.PodStorage, slices proxy.EndpointSliceGetter,
	transport http.RoundTripper) (*REST, *servicestore.StatusREST, *svcreg.ProxyREST, error) {
	services, status, proxy, err := servicestore.NewREST(recordIPAddresses{opts, a.clusterIPs}, a.primary, a.clusterIPs.forRegistry(),
		a.nodePorts.ForRegistry(), slices, pods, transport)
	if err != nil {
		return nil, nil, nil, err
	}
	a.clusterIPs.allocateThrough(services.Store)
	a.services = services
	return &REST{services}, status, proxy, nil
}

// REST is upstream's Services registry, but for one thing: a create
// refused because another apiserver stored the ClusterIP this one chose
// at the same moment (clusterip.CollisionError) is tried again, once,
// with the Service as the client sent it. The retry allocates
// synchronously (clusterip.Allocator.Allocating), creating each IPAddress
// before it hands the IP out, so it does not collide again, and the
// client gets its Service, as from kube-apiserver, not a 409.
type REST struct{ *servicestore.REST }

// Create implements rest.Creater.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	sent := obj.DeepCopyObject()
	out, err := r.REST.Create(ctx, obj, createValidation, options)
	if collision := (*clusterip.CollisionError)(nil); errors.As(err, &collision) {
		return r.REST.Create(ctx, sent, createValidation, options)
	}
	return out, err
}

// clusterIPAllocators are the ClusterIP allocators by IP family.
type clusterIPAllocators map[api.IPFamily]*clusterip.Allocator

// forRegistry is the allocators as upstream's Service registry takes them.
func (c clusterIPAllocators) forRegistry() map[api.IPFamily]ipallocator.Interface {
	out := make(map[api.IPFamily]ipallocator.Interface, len(c))
	for f, a := range c {
		out[f] = a
	}
	return out
}

// allocateThrough makes the Services registry store's allocation steps
// (BeginCreate, BeginUpdate) run through the allocators' Allocating.
func (c clusterIPAllocators) allocateThrough(store *genericregistry.Store) {
	beginCreate, beginUpdate := store.BeginCreate, store.BeginUpdate
	store.BeginCreate = func(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (finish genericregistry.FinishFunc, err error) {
		err = c.allocating(obj, func() error {
			finish, err = beginCreate(ctx, obj, options)
			return err
		})
		return finish, err
	}
	store.BeginUpdate = func(ctx context.Context, obj, old runtime.Object, options *metav1.UpdateOptions) (finish genericregistry.FinishFunc, err error) {
		err = c.allocating(obj, func() error {
			finish, err = beginUpdate(ctx, obj, old, options)
			return err
		})
		return finish, err
	}
}

// allocating runs allocate through every family's Allocating, in one
// order, so that concurrent calls take the allocators' locks alike.
func (c clusterIPAllocators) allocating(obj runtime.Object, allocate func() error) error {
	svc, ok := obj.(*api.Service)
	if !ok {
		return allocate()
	}
	for _, family := range []api.IPFamily{api.IPv4Protocol, api.IPv6Protocol} {
		if a := c[family]; a != nil {
			inner := allocate
			allocate = func() error { return a.Allocating(svc, inner) }
		}
	}
	return allocate()
}

func (c clusterIPAllocators) hasSynced() bool {
	for _, a := range c {
		if !a.HasSynced() {
			return false
		}
	}
	return true
}

// StartRepairs runs the first passes of both repair loops over the
// Services registry NewREST built: it returns once both succeeded (the
// post-start hook start-service-ip-repair-controllers, which /readyz waits
// for), or with an error past Config.RepairDeadline. Then the loops run
// every Config.RepairInterval until ctx is done.
func (a *Allocators) StartRepairs(ctx context.Context) error {
	if a.services == nil {
		return errors.New("the Services registry was not built (NewREST)")
	}
	services, recorder, deadline := a.services, a.cfg.Recorder, a.cfg.RepairDeadline
	logger := klog.FromContext(ctx)
	loops := []struct {
		name string
		pass func(context.Context) error
	}{
		{"ClusterIP", clusterip.NewRepair(v1Services{services}, a.client.NetworkingV1().IPAddresses(), a.cfg.CIDRs.All(), a.cidrObjects, recorder).RunOnce},
		{"NodePort", nodeport.NewRepair(a.nodePorts, a.nodePortStore, v1Services{services}, recorder).RunOnce},
	}
	pending := loops
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, deadline, true, func(ctx context.Context) (bool, error) {
		if !a.clusterIPs.hasSynced() {
			lastErr = errors.New("the ClusterIP allocators have not seen every ServiceCIDR and IPAddress yet")
			return false, nil
		}
		failed := pending[:0:0]
		var errs []error
		for _, loop := range pending {
			if err := loop.pass(ctx); err != nil {
				failed = append(failed, loop)
				errs = append(errs, fmt.Errorf("%s: %w", loop.name, err))
			}
		}
		pending, lastErr = failed, errors.Join(errs...)
		if lastErr != nil {
			logger.V(2).Info("First Service repair passes failed, will retry", "err", lastErr)
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the first Service ClusterIP and NodePort repair passes did not succeed within %s: %v", deadline, lastErr)
	}
	for _, loop := range loops {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			if err := loop.pass(ctx); err != nil {
				logger.Error(err, "Repair pass failed", "allocator", loop.name)
			}
		}, a.cfg.RepairInterval)
	}
	return nil
}

// v1Services lists the Services registry as core/v1 objects, which the
// NodePort repair loop reads, without a trip through the API.
type v1Services struct{ store *servicestore.REST }

func (l v1Services) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := l.store.List(ctx, options)
	if err != nil {
		return nil, err
	}
	out := &corev1.ServiceList{}
	if err := legacyscheme.Scheme.Convert(obj, out, nil); err != nil {
		return nil, fmt.Errorf("converting Services to v1: %w", err)
	}
	return out, nil
}

// recordIPAddresses is the Services registry's RESTOptionsGetter: its
// storage stores a Service only once the ClusterIP allocators have stored
// the IPAddresses of the IPs they hold for it.
type recordIPAddresses struct {
	generic.RESTOptionsGetter
	allocators clusterIPAllocators
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (o recordIPAddresses) GetRESTOptions(gr schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := o.RESTOptionsGetter.GetRESTOptions(gr, example)
	if err != nil || gr != api.Resource("services") {
		return opts, err
	}
	decorate := opts.Decorator
	opts.Decorator = func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs storage.AttrFunc, triggers storage.IndexerFuncs,
		indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := decorate(config, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrs, triggers, indexers)
		if err != nil {
			return nil, nil, err
		}
		return recordingServices{Interface: s, allocators: o.allocators}, destroy, nil
	}
	return opts, nil
}

// recordingServices is the Services storage: creates and updates store
// the IPAddresses of the Service's held ClusterIPs first; deletes and
// updates that drop ClusterIPs tell the allocators, whose next Release of
// those IPs is then the owner's (clusterip.Allocator.Release says why
// that matters).
type recordingServices struct {
	storage.Interface
	allocators clusterIPAllocators
}

func (s recordingServices) record(ctx context.Context, obj runtime.Object) error {
	svc, ok := obj.(*api.Service)
	if !ok {
		return nil
	}
	for _, a := range s.allocators {
		if err := a.Record(ctx, svc); err != nil {
			return err
		}
	}
	return nil
}

// dropped tells the allocators that next was stored in place of prev (nil
// next: prev was deleted).
func (s recordingServices) dropped(prev, next runtime.Object) {
	prevSvc, ok := prev.(*api.Service)
	if !ok {
		return
	}
	nextSvc, _ := next.(*api.Service)
	for _, a := range s.allocators {
		a.Dropped(prevSvc, nextSvc)
	}
}

func (s recordingServices) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := s.record(ctx, obj); err != nil {
		return err
	}
	return s.Interface.Create(ctx, key, obj, out, ttl)
}

func (s recordingServices) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	if err := s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts); err != nil {
		return err
	}
	s.dropped(out, nil)
	return nil
}

func (s recordingServices) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	var prev runtime.Object
	err := s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions,
		func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			out, ttl, err := tryUpdate(input, res)
			if err != nil {
				return out, ttl, err
			}
			if err := s.record(ctx, out); err != nil {
				return nil, nil, err
			}
			prev = input
			return out, ttl, nil
		}, cachedExistingObject)
	if err != nil {
		return err
	}
	if prev != nil {
		s.dropped(prev, destination)
	}
	return nil
}
