package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	servicestore "k8s.io/kubernetes/pkg/registry/core/service/storage"

	"github.com/kubeboot/kubeboot/internal/allocator/clusterip"
	"github.com/kubeboot/kubeboot/internal/allocator/nodeport"
	"github.com/kubeboot/kubeboot/internal/network"
	kstorage "github.com/kubeboot/kubeboot/internal/storage"
)

// How a Service gets its ClusterIPs and NodePorts: upstream's Service
// registry (defaulting, validation, IP families, the allocation
// transaction) calls the allocators built here.
//
//   - ClusterIPs: upstream's IPAddress allocator (one IPAddress object per
//     allocated IP) over the ServiceCIDRs, one per IP family. It stores the
//     IPAddresses through a clusterip.Writer, which lets it hand out the
//     next IP before the last one's object is committed; the Services
//     storage (awaitIPAddresses) waits for a Service's IPAddresses before it
//     stores the Service.
//   - NodePorts: kubeboot's bitmap allocator (internal/allocator/nodeport),
//     which shares one compare-and-swap write among concurrent requests.
//
// Their repair loops are kubeboot's (internal/allocator/clusterip and
// nodeport; docs/decisions.md says why not upstream's ClusterIP one). They
// run from the start-service-ip-repair-controllers hook, which holds
// /readyz until both first passes succeeded.

// Defaults, as kube-apiserver's.
const (
	// DefaultEventTTL is how long Events are kept (--event-ttl).
	DefaultEventTTL = time.Hour

	DefaultRepairInterval = 3 * time.Minute
	DefaultRepairDeadline = time.Minute
)

// serviceAllocators are the Service allocators and their repair loops.
type serviceAllocators struct {
	ips     map[api.IPFamily]ipallocator.Interface
	primary api.IPFamily
	// ipAddresses stores the IPAddress objects of every family's allocator.
	ipAddresses *clusterip.Writer

	nodePorts     *nodeport.Allocator
	nodePortStore storage.Interface

	client       kubernetes.Interface
	serviceCIDRs network.ServiceCIDRs
	cidrObjects  networkinglisters.ServiceCIDRLister
	destroy      func()
}

func newServiceAllocators(backend *kstorage.Backend, client kubernetes.Interface, factory informers.SharedInformerFactory,
	cidrs network.ServiceCIDRs, ports network.PortRange) (*serviceAllocators, error) {
	cidrInformer := factory.Networking().V1().ServiceCIDRs()
	out := &serviceAllocators{ips: map[api.IPFamily]ipallocator.Interface{}, client: client,
		serviceCIDRs: cidrs, cidrObjects: cidrInformer.Lister()}
	ipInformer, err := clusterip.NewFamilyInformer(factory.Networking().V1().IPAddresses())
	if err != nil {
		return nil, err
	}
	out.ipAddresses = clusterip.NewWriter(client.NetworkingV1(), ipInformer.Lister())
	var destroys []func()
	out.destroy = func() {
		for _, d := range destroys {
			d()
		}
	}
	for i, p := range cidrs.All() {
		a, err := ipallocator.NewMetaAllocator(out.ipAddresses, cidrInformer, ipInformer, p.Addr().Is6(), nil)
		if err != nil {
			out.destroy()
			return nil, fmt.Errorf("ClusterIP allocator for %s: %w", p, err)
		}
		a.EnableMetrics()
		destroys = append(destroys, a.Destroy)
		out.ips[a.IPFamily()] = a
		if i == 0 {
			out.primary = a.IPFamily()
		}
	}
	raw, destroyRaw, err := backend.Raw(corev1.Resource("servicenodeportallocations"), nodeport.Key,
		func() runtime.Object { return &corev1.RangeAllocation{} }, nil)
	if err != nil {
		out.destroy()
		return nil, fmt.Errorf("node port allocation storage: %w", err)
	}
	out.nodePorts = nodeport.New(ports, raw)
	out.nodePortStore = raw
	destroys = append(destroys, out.nodePorts.Close, destroyRaw)
	return out, nil
}

// startRepairs runs the first passes of both repair loops: until both
// succeeded the hook, and so /readyz, is not done; if they cannot succeed
// within deadline, the error ends the process. Then the loops run every
// interval until ctx is done.
func (a *serviceAllocators) startRepairs(ctx context.Context, services *servicestore.REST, recorder record.EventRecorder, interval, deadline time.Duration) error {
	logger := klog.FromContext(ctx)
	loops := []struct {
		name string
		pass func(context.Context) error
	}{
		{"ClusterIP", clusterip.NewRepair(v1Services{services}, a.client.NetworkingV1().IPAddresses(), a.serviceCIDRs.All(), a.cidrObjects, recorder).RunOnce},
		{"NodePort", nodeport.NewRepair(a.nodePorts, a.nodePortStore, v1Services{services}, recorder).RunOnce},
	}
	pending := loops
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, deadline, true, func(ctx context.Context) (bool, error) {
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
		}, interval)
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

// awaitIPAddresses is the Services registry's RESTOptionsGetter: its
// storage stores a Service only once the allocators' Writer stored the
// IPAddresses of the Service's ClusterIPs.
type awaitIPAddresses struct {
	generic.RESTOptionsGetter
	writer *clusterip.Writer
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (o awaitIPAddresses) GetRESTOptions(gr schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
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
		return awaitingServices{Interface: s, writer: o.writer}, destroy, nil
	}
	return opts, nil
}

// awaitingServices is the Services storage: creates and updates wait for
// the IPAddresses of the Service they store.
type awaitingServices struct {
	storage.Interface
	writer *clusterip.Writer
}

func (s awaitingServices) await(ctx context.Context, obj runtime.Object) error {
	svc, ok := obj.(*api.Service)
	if !ok {
		return nil
	}
	return s.writer.Await(ctx, svc.Namespace+"/"+svc.Name, svc.Spec.ClusterIPs)
}

func (s awaitingServices) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := s.await(ctx, obj); err != nil {
		return err
	}
	return s.Interface.Create(ctx, key, obj, out, ttl)
}

func (s awaitingServices) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions,
		func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			out, ttl, err := tryUpdate(input, res)
			if err != nil {
				return out, ttl, err
			}
			if err := s.await(ctx, out); err != nil {
				return nil, nil, err
			}
			return out, ttl, nil
		}, cachedExistingObject)
}
