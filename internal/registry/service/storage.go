package service

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// Storage holds the services resource and its status.
type Storage struct {
	Service *registry.REST
	Status  *registry.StatusREST
}

// NewStorage returns the services storage, allocating through alloc.
func NewStorage(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper, alloc *Allocators) (*Storage, error) {
	main, err := registry.NewStore(opts, registry.StoreConfig{
		Resource:   corev1.Resource("services"),
		Singular:   "service",
		New:        func() runtime.Object { return &corev1.Service{} },
		NewList:    func() runtime.Object { return &corev1.ServiceList{} },
		Strategy:   Strategy(typer),
		Table:      printers.Services(),
		Attrs:      attrs,
		ShortNames: []string{"svc"},
		Categories: []string{"all"},
	})
	if err != nil {
		return nil, err
	}
	h := hooks{alloc: alloc}
	main.BeginCreate = h.beginCreate
	main.BeginUpdate = h.beginUpdate
	main.AfterDelete = h.afterDelete
	return &Storage{Service: main, Status: registry.NewStatusREST(main, StatusStrategy(typer))}, nil
}

// hooks connect the generic store's write path to the allocator.
type hooks struct {
	alloc *Allocators
}

func (h hooks) beginCreate(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("not a service: %T", obj)
	}
	if errs := validation.ValidateServiceMetadata(svc); len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
	}
	txn, err := h.alloc.Create(ctx, svc, len(options.DryRun) > 0)
	if err != nil {
		return nil, err
	}
	return finish(txn), nil
}

func (h hooks) beginUpdate(ctx context.Context, obj, oldObj runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("not a service: %T", obj)
	}
	old := oldObj.(*corev1.Service)
	keepAllocatedValues(svc, old)
	// Before allocating: fields that belonged to the old type go, so the
	// allocator frees what they held.
	dropTypeDependentFields(svc, old)
	txn, err := h.alloc.Update(ctx, svc, old, len(options.DryRun) > 0)
	if err != nil {
		return nil, err
	}
	return finish(txn), nil
}

func (h hooks) afterDelete(obj runtime.Object, options *metav1.DeleteOptions) {
	if len(options.DryRun) > 0 {
		return
	}
	svc := obj.(*corev1.Service)
	// The request's context may be gone; the repair loop frees anything
	// this misses.
	ctx := context.Background()
	if err := h.alloc.Release(ctx, svc); err != nil {
		klog.FromContext(ctx).Error(err, "Releasing the allocations of a deleted Service", "service", klog.KObj(svc))
	}
}

func finish(txn *transaction) genericregistry.FinishFunc {
	return func(ctx context.Context, success bool) {
		if success {
			txn.Commit(ctx)
		} else {
			txn.Revert(ctx)
		}
	}
}

// keepAllocatedValues carries over ClusterIPs and NodePorts that an update
// left empty while the Service still needs them, as kube-apiserver does:
// `kubectl replace` of a manifest without them must not change them.
func keepAllocatedValues(svc, old *corev1.Service) {
	if needsClusterIP(old) && needsClusterIP(svc) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 && len(old.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIP == old.Spec.ClusterIP {
			svc.Spec.ClusterIPs = old.Spec.ClusterIPs
		}
	}
	if needsNodePorts(old) && needsNodePorts(svc) {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			for _, op := range old.Spec.Ports {
				if op.Port == p.Port && op.Protocol == p.Protocol && op.NodePort != 0 {
					p.NodePort = op.NodePort
					break
				}
			}
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && old.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		old.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName
}

func needsNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

// dropTypeDependentFields clears, when a Service changes type, the fields
// only its old type used and the client left as they were, as
// kube-apiserver does: changing a NodePort Service to ClusterIP must not
// fail on the node ports it still carries.
func dropTypeDependentFields(svc, old *corev1.Service) {
	// The health check port goes with externalTrafficPolicy Local, even
	// when the type stays LoadBalancer.
	if old.Spec.HealthCheckNodePort != 0 && !needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if svc.Spec.Type == old.Spec.Type {
		return
	}
	if needsNodePorts(old) && !needsNodePorts(svc) {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			for _, op := range old.Spec.Ports {
				if op.Port == p.Port && op.Protocol == p.Protocol && op.NodePort == p.NodePort {
					p.NodePort = 0
				}
			}
		}
	}
	if !externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if sameBoolPtr(svc.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts) {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if sameStringPtr(svc.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass) {
			svc.Spec.LoadBalancerClass = nil
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName && svc.Spec.InternalTrafficPolicy != nil &&
		old.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == *old.Spec.InternalTrafficPolicy {
		svc.Spec.InternalTrafficPolicy = nil
	}
}

// externallyAccessible: reached from outside the cluster (node ports, load
// balancers, or external IPs), so externalTrafficPolicy applies.
func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

func sameBoolPtr(a, b *bool) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func sameStringPtr(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
