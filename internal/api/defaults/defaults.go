// Package defaults holds kubeboot's v1 defaulting for every served type,
// matching the values kube-apiserver fills in. Defaulting runs on decode,
// before admission and validation, through the scheme.
package defaults

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultClientIPServiceAffinitySeconds is the default sticky-session
// timeout (3 hours), as kube-apiserver.
const DefaultClientIPServiceAffinitySeconds int32 = 10800

// Register adds the defaulting functions to a scheme, for objects and lists.
func Register(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(o interface{}) { Service(o.(*corev1.Service)) })
	s.AddTypeDefaultingFunc(&corev1.ServiceList{}, func(o interface{}) {
		for i := range o.(*corev1.ServiceList).Items {
			Service(&o.(*corev1.ServiceList).Items[i])
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Namespace{}, func(o interface{}) { Namespace(o.(*corev1.Namespace)) })
	s.AddTypeDefaultingFunc(&corev1.NamespaceList{}, func(o interface{}) {
		for i := range o.(*corev1.NamespaceList).Items {
			Namespace(&o.(*corev1.NamespaceList).Items[i])
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(o interface{}) { Secret(o.(*corev1.Secret)) })
	s.AddTypeDefaultingFunc(&corev1.SecretList{}, func(o interface{}) {
		for i := range o.(*corev1.SecretList).Items {
			Secret(&o.(*corev1.SecretList).Items[i])
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(o interface{}) { Endpoints(o.(*corev1.Endpoints)) })
	s.AddTypeDefaultingFunc(&corev1.EndpointsList{}, func(o interface{}) {
		for i := range o.(*corev1.EndpointsList).Items {
			Endpoints(&o.(*corev1.EndpointsList).Items[i])
		}
	})
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSlice{}, func(o interface{}) { EndpointSlice(o.(*discoveryv1.EndpointSlice)) })
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSliceList{}, func(o interface{}) {
		for i := range o.(*discoveryv1.EndpointSliceList).Items {
			EndpointSlice(&o.(*discoveryv1.EndpointSliceList).Items[i])
		}
	})
}

// Service fills in type, session affinity, port protocols and target ports,
// and the traffic policies, as kube-apiserver's v1 defaulting does.
// ClusterIPs, IP families and the family policy are not defaults: the
// service registry sets them while allocating.
func Service(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if spec.SessionAffinityConfig == nil || spec.SessionAffinityConfig.ClientIP == nil || spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			timeout := DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.ExternalTrafficPolicy == "" {
			spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}
	}
	if spec.InternalTrafficPolicy == nil && spec.Type != corev1.ServiceTypeExternalName {
		p := corev1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &p
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
}

// Namespace sets the immutable kubernetes.io/metadata.name label and the
// Active phase.
func Namespace(ns *corev1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// Secret defaults the type to Opaque.
func Secret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

// Endpoints defaults every port's protocol to TCP.
func Endpoints(e *corev1.Endpoints) {
	for i := range e.Subsets {
		for j := range e.Subsets[i].Ports {
			if e.Subsets[i].Ports[j].Protocol == "" {
				e.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// EndpointSlice defaults each port's name to "" and protocol to TCP.
func EndpointSlice(s *discoveryv1.EndpointSlice) {
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			p.Name = new(string)
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}
