package simulatednodes

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// podIPs gives the simulated nodes' Pods their IPs, in place of kwok's
// PodIPsWith template function (the pod-ready stage's): one set of IPs
// per Pod, however often the stage plays for it. kwok's function takes
// a new IP on every call, and under load kwok plays pod-ready twice for
// some Pods (a Pod watch restarted while the first play is in flight
// hands it the Pod as it was before): the second play then adds a second
// IPv4 address, which the API server refuses (422), and the first is
// never given back.
//
// A node's IPs are kept as the node's Pods show them: read from the API
// server's cache (one list of the node's Pods) when the node first needs
// an IP, as after a restart, and again whenever its pod CIDRs are full,
// which gives back the IPs of the Pods since deleted. There is no watch of
// every Pod to keep.
type podIPs struct {
	ctx    context.Context
	client kubernetes.Interface

	mu    sync.Mutex
	nodes map[string]*nodePodIPs
}

// nodePodIPs are one node's: its pod CIDRs and addresses, the IPs each
// Pod was given and those in use.
type nodePodIPs struct {
	mu      sync.Mutex
	loaded  bool
	cidrs   []netip.Prefix
	hostIPs []string
	byUID   map[types.UID][]string
	used    map[netip.Addr]bool
	// next is, per CIDR, where the search for a free address starts, so
	// an IP given back is not handed out again at once.
	next []netip.Addr
}

func newPodIPs(ctx context.Context, client kubernetes.Interface) *podIPs {
	return &podIPs{ctx: ctx, client: client, nodes: map[string]*nodePodIPs{}}
}

// with is PodIPsWith, as kwok's stages call it: the IPs of the Pod uid
// on nodeName, one from each of the node's pod CIDRs, or the node's own
// addresses for a host-network Pod.
func (p *podIPs) with(nodeName string, hostNetwork bool, uid, _, _ string) ([]string, error) {
	p.mu.Lock()
	n, ok := p.nodes[nodeName]
	if !ok {
		n = &nodePodIPs{}
		p.nodes[nodeName] = n
	}
	p.mu.Unlock()

	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.loaded {
		if err := p.load(nodeName, n); err != nil {
			return nil, err
		}
	}
	if hostNetwork {
		return n.hostIPs, nil
	}
	if ips, ok := n.byUID[types.UID(uid)]; ok {
		return ips, nil
	}
	ips, ok := n.take()
	if !ok {
		// Full: the Pods deleted since the last look give theirs back.
		if err := p.load(nodeName, n); err != nil {
			return nil, err
		}
		if ips, ok = n.take(); !ok {
			return nil, fmt.Errorf("node %s: every IP of its pod CIDRs %v is in use", nodeName, n.cidrs)
		}
	}
	n.byUID[types.UID(uid)] = ips
	return ips, nil
}

// load reads the node's pod CIDRs and addresses, and its Pods' IPs: the
// IPs of its Pods are in use, as are those given to a Pod still there
// whose status does not show them yet.
func (p *podIPs) load(nodeName string, n *nodePodIPs) error {
	// ResourceVersion 0: from the API server's cache, which is at least
	// as new as the watch that brought kwok the Pod.
	node, err := p.client.CoreV1().Nodes().Get(p.ctx, nodeName, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("pod IPs on node %s: %w", nodeName, err)
	}
	pods, err := p.client.CoreV1().Pods(metav1.NamespaceAll).List(p.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(), ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("pod IPs on node %s: %w", nodeName, err)
	}
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	n.cidrs = n.cidrs[:0]
	for _, c := range cidrs {
		prefix, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("pod IPs on node %s: pod CIDR %q: %w", nodeName, c, err)
		}
		n.cidrs = append(n.cidrs, prefix.Masked())
	}
	if len(n.next) != len(n.cidrs) {
		n.next = make([]netip.Addr, len(n.cidrs))
	}
	n.hostIPs = nil
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			n.hostIPs = append(n.hostIPs, a.Address)
		}
	}
	byUID := map[types.UID][]string{}
	used := map[netip.Addr]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName != nodeName || pod.Spec.HostNetwork {
			continue
		}
		ips := n.byUID[pod.UID]
		if len(pod.Status.PodIPs) > 0 {
			ips = make([]string, 0, len(pod.Status.PodIPs))
			for _, ip := range pod.Status.PodIPs {
				ips = append(ips, ip.IP)
			}
		}
		if ips == nil {
			continue
		}
		byUID[pod.UID] = ips
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err == nil {
				used[a] = true
			}
		}
	}
	n.byUID, n.used, n.loaded = byUID, used, true
	return nil
}

// take marks as used and returns a free IP from each of the node's pod
// CIDRs, none if any is full.
func (n *nodePodIPs) take() ([]string, bool) {
	ips := make([]string, len(n.cidrs))
	addrs := make([]netip.Addr, len(n.cidrs))
	for i, cidr := range n.cidrs {
		a, ok := n.free(i, cidr)
		if !ok {
			return nil, false
		}
		addrs[i], ips[i] = a, a.String()
	}
	for i, a := range addrs {
		n.used[a] = true
		n.next[i] = a.Next()
	}
	return ips, true
}

// free is the first address of cidr not in use from next on, wrapping
// around once; not its first address (the network's), nor, in IPv4, its
// last (the broadcast).
func (n *nodePodIPs) free(i int, cidr netip.Prefix) (netip.Addr, bool) {
	first := cidr.Addr().Next()
	start := n.next[i]
	if !start.IsValid() || !cidr.Contains(start) || start == cidr.Addr() {
		start = first
	}
	usable := func(a netip.Addr) bool {
		if !cidr.Contains(a) {
			return false
		}
		return !a.Is4() || cidr.Bits() >= 31 || cidr.Contains(a.Next())
	}
	for a := start; usable(a); a = a.Next() {
		if !n.used[a] {
			return a, true
		}
	}
	for a := first; a != start && usable(a); a = a.Next() {
		if !n.used[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}
