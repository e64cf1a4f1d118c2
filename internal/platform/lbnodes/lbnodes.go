// Package lbnodes says which nodes answer for the load balancers that
// kubeboot serves on the nodes' own addresses (LoadBalancer Services,
// Gateways, Ingresses), and at which of their addresses.
package lbnodes

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
)

// ExcludeLabel keeps a node out of every load balancer, as upstream's
// service controller honours it.
const ExcludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// Eligible reports whether n answers for load balancers: Ready, and not
// excluded by its label.
func Eligible(n *corev1.Node) bool {
	_, excluded := n.Labels[ExcludeLabel]
	return !excluded && nodeutil.IsNodeReady(n)
}

// Addresses are n's ExternalIPs, or its InternalIPs if it has none.
func Addresses(n *corev1.Node) []netip.Addr {
	var external, internal []netip.Addr
	for _, a := range n.Status.Addresses {
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		switch a.Type {
		case corev1.NodeExternalIP:
			external = append(external, ip)
		case corev1.NodeInternalIP:
			internal = append(internal, ip)
		}
	}
	if len(external) > 0 {
		return external
	}
	return internal
}
