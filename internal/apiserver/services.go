package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	ipcontroller "k8s.io/kubernetes/pkg/registry/core/service/ipallocator/controller"
	servicestore "k8s.io/kubernetes/pkg/registry/core/service/storage"

	"github.com/kubeboot/kubeboot/internal/allocator/nodeport"
	"github.com/kubeboot/kubeboot/internal/network"
	kstorage "github.com/kubeboot/kubeboot/internal/storage"
)

// How a Service gets its ClusterIPs and NodePorts: upstream's Service
// registry (defaulting, validation, IP families, the allocation
// transaction) calls the allocators built here.
//
//   - ClusterIPs: upstream's IPAddress allocator (one IPAddress object per
//     allocated IP, created through the loopback client, which in kubeboot
//     is in-process) over the ServiceCIDRs, one per IP family.
//   - NodePorts: kubeboot's bitmap allocator (internal/allocator/nodeport),
//     which shares one compare-and-swap write among concurrent requests.
//
// Their repair loops run from the start-service-ip-repair-controllers
// hook, which holds /readyz until both first passes succeeded.

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

	nodePorts     *nodeport.Allocator
	nodePortStore storage.Interface

	ipRepair *ipcontroller.RepairIPAddress
	destroy  func()
}

func newServiceAllocators(backend *kstorage.Backend, client kubernetes.Interface, factory informers.SharedInformerFactory,
	cidrs network.ServiceCIDRs, ports network.PortRange, repairInterval time.Duration) (*serviceAllocators, error) {
	out := &serviceAllocators{ips: map[api.IPFamily]ipallocator.Interface{}}
	cidrInformer := factory.Networking().V1().ServiceCIDRs()
	ipInformer := factory.Networking().V1().IPAddresses()
	var destroys []func()
	out.destroy = func() {
		for _, d := range destroys {
			d()
		}
	}
	for i, p := range cidrs.All() {
		a, err := ipallocator.NewMetaAllocator(client.NetworkingV1(), cidrInformer, ipInformer, p.Addr().Is6(), nil)
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
	out.ipRepair = ipcontroller.NewRepairIPAddress(repairInterval, client, factory.Core().V1().Services(), cidrInformer, ipInformer)
	return out, nil
}

// startRepairs runs the first passes of both repair loops: until both
// succeeded the hook, and so /readyz, is not done; if they cannot succeed
// within deadline, the error ends the process. Then the loops run every
// interval until ctx is done.
func (a *serviceAllocators) startRepairs(ctx context.Context, services *servicestore.REST, recorder record.EventRecorder, interval, deadline time.Duration) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	ipsRepaired := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		<-ctx.Done()
		close(stop)
	}()
	go a.ipRepair.RunUntil(func() { close(ipsRepaired) }, stop)

	portRepair := nodeport.NewRepair(a.nodePorts, a.nodePortStore, v1Services{services}, recorder)
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, deadline, true, func(ctx context.Context) (bool, error) {
		if lastErr = portRepair.RunOnce(ctx); lastErr != nil {
			logger.V(2).Info("First NodePort repair pass failed, will retry", "err", lastErr)
			return false, nil
		}
		return true, nil
	})
	if err == nil {
		select {
		case <-ipsRepaired:
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(time.Until(start.Add(deadline))):
			err = errors.New("the ClusterIP repair has not completed a pass")
			lastErr = err
		}
	}
	if err != nil {
		return fmt.Errorf("the first Service ClusterIP and NodePort repair passes did not succeed within %s: %v", deadline, lastErr)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := portRepair.RunOnce(ctx); err != nil {
			logger.Error(err, "NodePort repair pass failed")
		}
	}, interval)
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
