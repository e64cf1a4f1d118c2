//go:build linux

package networkpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// The cluster DNS a server serves in its process is no Pod, and serves
// at another port than 53 (clusterdns): a policy could neither select
// it nor allow it by DNS's port, so the policies users write to allow
// DNS (port 53 to anywhere, or to kube-system's k8s-app=kube-dns Pods)
// would cut their Pods off it. Policies judge a packet to it as one to
// the CoreDNS Pod it stands for, in kube-system, labelled as CoreDNS's
// Pods are, serving port 53 under its EndpointSlice's port names (dns,
// dns-tcp); what they do not allow stays denied.
const (
	// dnsService is the cluster DNS's Service, in kube-system.
	dnsService = "kube-dns"
	// dnsPodPort is the port of the CoreDNS Pods the endpoints stand for.
	dnsPodPort = 53
)

// dnsPodLabels are the CoreDNS Pods' labels (kubeadm's, k3s's).
var dnsPodLabels = labels.Set{"k8s-app": "kube-dns"}

// dnsEndpoint is an address of the cluster DNS that is no Pod, and
// where it serves.
type dnsEndpoint struct {
	ip    netip.Addr
	ports []dnsPort
}

type dnsPort struct {
	name     string
	protocol corev1.Protocol
	port     int32
}

// dnsEndpoints are the addresses of the kube-dns Service's EndpointSlices
// that are no Pod's (a Pod's address is judged as that Pod).
func dnsEndpoints(endpointSlices []*discoveryv1.EndpointSlice) []dnsEndpoint {
	var out []dnsEndpoint
	for _, s := range endpointSlices {
		if s.Namespace != metav1.NamespaceSystem || s.Labels[discoveryv1.LabelServiceName] != dnsService {
			continue
		}
		var ports []dnsPort
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			ports = append(ports, dnsPort{name: ptr.Deref(p.Name, ""), protocol: ptr.Deref(p.Protocol, corev1.ProtocolTCP), port: *p.Port})
		}
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				continue
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					out = append(out, dnsEndpoint{ip.Unmap(), ports})
				}
			}
		}
	}
	return out
}

// dnsMatches are the matches of what an egress rule allows of the
// cluster DNS: each endpoint its peers would select as the Pod it stands
// for, on the ports it serves whose Pod's port the rule's ports allow.
func (b *builder) dnsMatches(namespace string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) ([]string, error) {
	var out []string
	for _, e := range b.dns {
		selected, err := b.peersSelect(namespace, peers, metav1.NamespaceSystem, dnsPodLabels, e.ip)
		if err != nil {
			return nil, err
		}
		if !selected {
			continue
		}
		var allowed []string
		for _, p := range e.ports {
			elem := fmt.Sprintf("%s . %d", strings.ToLower(string(p.protocol)), p.port)
			if portsAllow(ports, p.name, p.protocol, dnsPodPort) && !slices.Contains(allowed, elem) {
				allowed = append(allowed, elem)
			}
		}
		if len(allowed) > 0 {
			f := familyOf(e.ip)
			out = append(out, knftables.Concat(f.proto, "daddr", e.ip, "meta l4proto . th dport { "+strings.Join(allowed, ", ")+" }"))
		}
	}
	return out, nil
}

// peersSelect reports whether a rule's peers include a Pod of namespace
// podNamespace with podLabels at ip: every Pod when it names none.
func (b *builder) peersSelect(namespace string, peers []networkingv1.NetworkPolicyPeer, podNamespace string, podLabels labels.Set, ip netip.Addr) (bool, error) {
	if len(peers) == 0 {
		return true, nil
	}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			if blockContains(peer.IPBlock, ip) {
				return true, nil
			}
			continue
		}
		selects, err := b.peerSelector(namespace, peer)
		if err != nil {
			return false, err
		}
		if selects(podNamespace, podLabels) {
			return true, nil
		}
	}
	return false, nil
}

// blockContains reports whether ip is in block's CIDR and in none of its
// exceptions. A block that does not parse contains nothing (peerMatches
// reports it).
func blockContains(block *networkingv1.IPBlock, ip netip.Addr) bool {
	cidr, err := netip.ParsePrefix(block.CIDR)
	if err != nil || !cidr.Contains(ip) {
		return false
	}
	for _, e := range block.Except {
		if p, err := netip.ParsePrefix(e); err != nil || p.Contains(ip) {
			return false
		}
	}
	return true
}

// portsAllow reports whether a rule's ports allow a Pod's port number
// named name: every port when it names none.
func portsAllow(ports []networkingv1.NetworkPolicyPort, name string, protocol corev1.Protocol, number int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if ptr.Deref(p.Protocol, corev1.ProtocolTCP) != protocol {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.Int:
			if number >= p.Port.IntVal && number <= ptr.Deref(p.EndPort, p.Port.IntVal) {
				return true
			}
		case p.Port.StrVal == name:
			return true
		}
	}
	return false
}
