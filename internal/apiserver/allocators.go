package apiserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	networkinglisters "k8s.io/client-go/listers/networking/v1"

	"github.com/kubeboot/kubeboot/internal/allocator/clusterip"
	"github.com/kubeboot/kubeboot/internal/allocator/nodeport"
	"github.com/kubeboot/kubeboot/internal/network"
	"github.com/kubeboot/kubeboot/internal/registry/service"
	kstorage "github.com/kubeboot/kubeboot/internal/storage"
	"k8s.io/apiserver/pkg/storage"
)

// knownIPs answers from the IPAddress informer's cache.
type knownIPs struct {
	lister networkinglisters.IPAddressLister
}

func (k knownIPs) Has(ip string) bool {
	_, err := k.lister.Get(ip)
	return err == nil
}

// allocators are the Service allocators and what they own.
type allocators struct {
	service   *service.Allocators
	clusterIP []*clusterip.Allocator
	nodePorts *nodeport.Allocator
	// nodePortStore is the bitmap's storage, which the repair loop writes.
	nodePortStore storage.Interface
	destroy       func()
}

// newAllocators builds the ClusterIP allocators (one per configured range,
// persisting IPAddresses through ipStore) and the NodePort allocator (on
// its bitmap in etcd).
func newAllocators(backend *kstorage.Backend, ipStore clusterip.Store, informerFactory informers.SharedInformerFactory,
	cidrs network.ServiceCIDRs, ports network.PortRange) (*allocators, error) {
	known := knownIPs{lister: informerFactory.Networking().V1().IPAddresses().Lister()}
	ips := map[corev1.IPFamily]service.IPAllocator{}
	out := &allocators{}
	var primary corev1.IPFamily
	for i, p := range cidrs.All() {
		a := clusterip.New(clusterip.NewRange(p), ipStore, known)
		ips[a.Family()] = a
		out.clusterIP = append(out.clusterIP, a)
		if i == 0 {
			primary = a.Family()
		}
	}
	raw, destroy, err := backend.Raw(corev1.Resource("rangeallocations"), nodeport.Key,
		func() runtime.Object { return &corev1.RangeAllocation{} }, nil)
	if err != nil {
		return nil, fmt.Errorf("node port allocation storage: %w", err)
	}
	out.nodePorts = nodeport.New(ports, raw)
	out.nodePortStore = raw
	out.destroy = func() {
		out.nodePorts.Close()
		destroy()
	}
	out.service = service.NewAllocators(primary, ips, out.nodePorts)
	return out, nil
}
