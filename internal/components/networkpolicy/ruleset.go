//go:build linux

package networkpolicy

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
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

// TableName is the node's nftables table, in the inet family: one table
// for IPv4 and IPv6, whose sets and maps are per address family.
const TableName = "kubeboot-network-policy"

// The table's base chains. Egress and ingress are checked in chains of
// their own: an accept ends only the base chain it is in, so a packet
// between two isolated Pods of the node passes both the sender's egress
// and the receiver's ingress, and a reject in either ends it.
const (
	forwardEgressChain  = "forward-egress"
	forwardIngressChain = "forward-ingress"
	inputEgressChain    = "input-egress"
)

// denyRule ends a Pod's chain: what no policy allows is refused at once
// (the sender sees "administratively prohibited"), not left to time out.
const denyRule = "reject with icmpx admin-prohibited"

// direction is a policy type as the dataplane sees it.
type direction struct {
	policyType networkingv1.PolicyType
	// name prefixes the direction's chains, sets and maps.
	name string
	// peer and pod are the address fields of the peer's and of the
	// selected Pod's address: saddr and daddr for ingress.
	peer, pod string
}

var (
	ingress = direction{networkingv1.PolicyTypeIngress, "ingress", "saddr", "daddr"}
	egress  = direction{networkingv1.PolicyTypeEgress, "egress", "daddr", "saddr"}
)

// family is an address family of the table.
type family struct {
	// name suffixes the family's sets and maps; proto is its protocol
	// expression; addr its address type.
	name, proto, addr string
}

var (
	ipv4     = family{"v4", "ip", "ipv4_addr"}
	ipv6     = family{"v6", "ip6", "ipv6_addr"}
	families = []family{ipv4, ipv6}
)

func familyOf(a netip.Addr) family {
	if a.Is4() || a.Is4In6() {
		return ipv4
	}
	return ipv6
}

// state is what the node's ruleset is computed from: the cluster's
// Pods, Namespaces and NetworkPolicies, as the node's informers hold them.
type state struct {
	node       string
	pods       []*corev1.Pod
	namespaces []*corev1.Namespace
	policies   []*networkingv1.NetworkPolicy
	// dnsSlices are the kube-dns Service's EndpointSlices (clusterdns.go).
	dnsSlices []*discoveryv1.EndpointSlice
}

// pod is a Pod that has addresses on the pod network.
type pod struct {
	*corev1.Pod
	ips []netip.Addr
}

// networkPods are the Pods with addresses on the pod network: not on
// the host's network (never isolated, and no peer a selector can tell
// from its node), not finished (their addresses may be another's now).
func networkPods(pods []*corev1.Pod) []pod {
	var out []pod
	for _, p := range pods {
		if p.Spec.HostNetwork || finished(p) {
			continue
		}
		var ips []netip.Addr
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				ips = append(ips, a.Unmap())
			}
		}
		if len(ips) > 0 {
			out = append(out, pod{p, ips})
		}
	}
	return out
}

// finished reports whether a Pod has ended: its address may be another's.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// ruleset computes the node's whole table from s and writes it into tx,
// replacing whatever the table held: one transaction, which nftables
// applies entirely or not at all. Policies whose selectors do not parse
// are refused by the API; should one reach here, it selects nothing it
// cannot parse and allows nothing (the conservative reading), and is
// returned in invalid.
func ruleset(tx *knftables.Transaction, s state) (invalid []error) {
	pods := networkPods(s.pods)
	nsLabels := make(map[string]labels.Set, len(s.namespaces))
	for _, ns := range s.namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	var local []pod
	for _, p := range pods {
		if p.Spec.NodeName == s.node {
			local = append(local, p)
		}
	}
	policies := slices.Clone(s.policies)
	slices.SortFunc(policies, func(a, b *networkingv1.NetworkPolicy) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})

	// Replace the table: add it (so that the delete finds it), delete it,
	// write it anew.
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("NetworkPolicy, enforced for this node's Pods")})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("NetworkPolicy, enforced for this node's Pods")})

	b := builder{tx: tx, pods: pods, nsLabels: nsLabels, dns: dnsEndpoints(s.dnsSlices)}
	for _, d := range []direction{ingress, egress} {
		// Each local Pod a policy of this direction selects gets the
		// chain of the policies that select it; Pods selected by the
		// same policies share one.
		podChains := map[string][]string{} // chain -> policy chains
		verdicts := map[family][]*knftables.Element{}
		// The node's Pods each policy of this direction selects, and the
		// policies that select each Pod.
		selects := make([][]pod, len(policies))
		selectedBy := map[*corev1.Pod][]int{}
		for i, np := range policies {
			if !hasType(np, d.policyType) {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				invalid = append(invalid, &policyError{np.Namespace + "/" + np.Name, fmt.Errorf("spec.podSelector: %w", err)})
				continue
			}
			for _, p := range local {
				if np.Namespace == p.Namespace && sel.Matches(labels.Set(p.Labels)) {
					selects[i] = append(selects[i], p)
					selectedBy[p.Pod] = append(selectedBy[p.Pod], i)
				}
			}
		}
		for _, p := range local {
			var selecting []string
			for _, i := range selectedBy[p.Pod] {
				selecting = append(selecting, b.policyChain(d, policies[i], selects[i]))
			}
			if len(selecting) == 0 {
				continue
			}
			chain := d.name + "-pods-" + hash(strings.Join(selecting, ","))
			podChains[chain] = selecting
			for _, ip := range p.ips {
				f := familyOf(ip)
				verdicts[f] = append(verdicts[f], &knftables.Element{
					Map: d.name + "-" + f.name, Key: []string{ip.String()}, Value: []string{"goto " + chain},
					Comment: knftables.PtrTo(p.Namespace + "/" + p.Name),
				})
			}
		}
		for chain, selecting := range podChains {
			tx.Add(&knftables.Chain{Name: chain})
			for _, pc := range selecting {
				tx.Add(&knftables.Rule{Chain: chain, Rule: "jump " + pc})
			}
			tx.Add(&knftables.Rule{Chain: chain, Rule: denyRule})
		}
		for _, f := range families {
			tx.Add(&knftables.Map{Name: d.name + "-" + f.name, Type: f.addr + " : verdict"})
			for _, e := range verdicts[f] {
				tx.Add(e)
			}
		}
	}
	invalid = append(invalid, b.invalid...)

	for _, c := range []struct {
		name string
		hook knftables.BaseChainHook
		// priority: ingress after egress, though either order holds.
		priority knftables.BaseChainPriority
		d        direction
	}{
		{forwardEgressChain, knftables.ForwardHook, knftables.FilterPriority, egress},
		{forwardIngressChain, knftables.ForwardHook, knftables.FilterPriority + "+1", ingress},
		// A Pod's traffic to its own node is egress too; the node's
		// traffic to its Pods (probes) passes no ingress check.
		{inputEgressChain, knftables.InputHook, knftables.FilterPriority, egress},
	} {
		tx.Add(&knftables.Chain{Name: c.name, Type: knftables.PtrTo(knftables.FilterType), Hook: &c.hook, Priority: &c.priority})
		// Established connections stay while policies change.
		tx.Add(&knftables.Rule{Chain: c.name, Rule: "ct state established,related accept"})
		for _, f := range families {
			tx.Add(&knftables.Rule{Chain: c.name, Rule: knftables.Concat(f.proto, c.d.pod, "vmap", "@"+c.d.name+"-"+f.name)})
		}
	}
	return invalid
}

func hasType(np *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		// The API defaults them; an object without is read as it would.
		return t == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	return slices.Contains(np.Spec.PolicyTypes, t)
}

// builder writes the policies' chains and sets, once each.
type builder struct {
	tx       *knftables.Transaction
	pods     []pod
	nsLabels map[string]labels.Set
	dns      []dnsEndpoint
	written  map[string]bool
	invalid  []error
}

// policyChain writes np's chain of direction d, once, and returns its
// name: a rule for each of the policy's rules that accepts what it
// allows; what none accepts returns to the Pod's chain. selected are the
// node's Pods np selects, on which ingress rules' named ports resolve.
func (b *builder) policyChain(d direction, np *networkingv1.NetworkPolicy, selected []pod) string {
	key := np.Namespace + "/" + np.Name
	name := d.name + "-" + hash(key)
	if b.written == nil {
		b.written = map[string]bool{}
	}
	if b.written[name] {
		return name
	}
	b.written[name] = true
	b.tx.Add(&knftables.Chain{Name: name, Comment: knftables.PtrTo(key)})
	type rule struct {
		peers []networkingv1.NetworkPolicyPeer
		ports []networkingv1.NetworkPolicyPort
	}
	var rules []rule
	if d == ingress {
		for _, r := range np.Spec.Ingress {
			rules = append(rules, rule{r.From, r.Ports})
		}
	} else {
		for _, r := range np.Spec.Egress {
			rules = append(rules, rule{r.To, r.Ports})
		}
	}
	for i, r := range rules {
		set := fmt.Sprintf("%s-%d", name, i)
		peers, peerPods, err := b.peerMatches(d, np.Namespace, set, r.peers)
		if err != nil {
			b.invalid = append(b.invalid, &policyError{key, fmt.Errorf("spec.%s[%d]: %w", d.name, i, err)})
			continue
		}
		// Named ports are the selected Pods' for ingress, the peers' for
		// egress: the Pods the selectors chose, or any Pod when the
		// rule has no peer or an ipBlock.
		named := selected
		if d == egress {
			named = peerPods
		}
		ports := b.portMatches(d, set, r.ports, named)
		for _, f := range families {
			for _, peer := range peers[f] {
				for _, port := range ports[f] {
					b.tx.Add(&knftables.Rule{Chain: name, Rule: join(peer, port, "accept")})
				}
			}
		}
		if d == egress {
			dns, err := b.dnsMatches(np.Namespace, r.peers, r.ports)
			if err != nil {
				b.invalid = append(b.invalid, &policyError{key, fmt.Errorf("spec.%s[%d]: %w", d.name, i, err)})
				continue
			}
			for _, m := range dns {
				b.tx.Add(&knftables.Rule{Chain: name, Rule: join(m, "accept")})
			}
		}
	}
	return name
}

// peerMatches are the matches of a rule's peers, per family, any of which
// a packet must meet: all addresses when the rule names no peer, else
// the set of the Pods its selectors select (written as set-<family>) and
// each ipBlock. pods are the Pods a peer may be: those the selectors
// select, or every Pod when the rule has no peer or an ipBlock.
func (b *builder) peerMatches(d direction, namespace, set string, peers []networkingv1.NetworkPolicyPeer) (matches map[family][]string, pods []pod, err error) {
	if len(peers) == 0 {
		return map[family][]string{ipv4: {""}, ipv6: {""}}, b.pods, nil
	}
	out := map[family][]string{}
	var selected []pod
	selectors, blocks := false, false
	for _, peer := range peers {
		if peer.IPBlock != nil {
			blocks = true
			cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil {
				return nil, nil, fmt.Errorf("ipBlock.cidr: %w", err)
			}
			f := familyOf(cidr.Addr())
			match := knftables.Concat(f.proto, d.peer, cidr.Masked())
			var except []string
			for _, e := range peer.IPBlock.Except {
				p, err := netip.ParsePrefix(e)
				if err != nil {
					return nil, nil, fmt.Errorf("ipBlock.except: %w", err)
				}
				except = append(except, p.Masked().String())
			}
			if len(except) > 0 {
				match = knftables.Concat(match, f.proto, d.peer, "!=", "{", strings.Join(except, ", "), "}")
			}
			out[f] = append(out[f], match)
			continue
		}
		selectors = true
		pods, err := b.selectPeers(namespace, peer)
		if err != nil {
			return nil, nil, err
		}
		selected = append(selected, pods...)
	}
	if selectors {
		for _, f := range families {
			name := set + "-" + f.name
			b.tx.Add(&knftables.Set{Name: name, Type: f.addr})
			seen := map[netip.Addr]bool{}
			for _, p := range selected {
				for _, ip := range p.ips {
					if familyOf(ip) == f && !seen[ip] {
						seen[ip] = true
						b.tx.Add(&knftables.Element{Set: name, Key: []string{ip.String()}})
					}
				}
			}
			out[f] = append(out[f], knftables.Concat(f.proto, d.peer, "@"+name))
		}
	}
	if blocks {
		return out, b.pods, nil
	}
	return out, selected, nil
}

// selectPeers are the Pods a peer's selectors select.
func (b *builder) selectPeers(namespace string, peer networkingv1.NetworkPolicyPeer) ([]pod, error) {
	selects, err := b.peerSelector(namespace, peer)
	if err != nil {
		return nil, err
	}
	var out []pod
	for _, p := range b.pods {
		if selects(p.Namespace, labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// peerSelector is a peer's selectors of a policy in namespace, as a test
// of a Pod's namespace and labels: its podSelector in the policy's
// namespace, in the namespaces its namespaceSelector selects, or both.
func (b *builder) peerSelector(namespace string, peer networkingv1.NetworkPolicyPeer) (func(podNamespace string, podLabels labels.Set) bool, error) {
	podSel, nsSel := labels.Everything(), labels.Nothing()
	var err error
	if peer.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
			return nil, fmt.Errorf("podSelector: %w", err)
		}
	}
	if peer.NamespaceSelector != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	return func(podNamespace string, podLabels labels.Set) bool {
		inNamespace := podNamespace == namespace
		if peer.NamespaceSelector != nil {
			inNamespace = nsSel.Matches(b.nsLabels[podNamespace])
		}
		return inNamespace && podSel.Matches(podLabels)
	}, nil
}

// portMatches are the matches of a rule's ports, per family, any of which
// a packet must meet: every port when the rule names none; numbered ports
// and ranges as one anonymous set of protocol and port; protocols without
// a port; and named ports as the set (set-named-<family>) of the address,
// protocol and number each of pods gives the name.
func (b *builder) portMatches(d direction, set string, ports []networkingv1.NetworkPolicyPort, pods []pod) map[family][]string {
	if len(ports) == 0 {
		return map[family][]string{ipv4: {""}, ipv6: {""}}
	}
	var protocols []string
	numbered := map[string][][2]int32{}     // protocol -> port ranges
	named := map[string][]corev1.Protocol{} // name -> protocols
	for _, p := range ports {
		proto := ptr.Deref(p.Protocol, corev1.ProtocolTCP)
		l4 := strings.ToLower(string(proto))
		switch {
		case p.Port == nil:
			protocols = append(protocols, l4)
		case p.Port.Type == intstr.Int:
			numbered[l4] = append(numbered[l4], [2]int32{p.Port.IntVal, ptr.Deref(p.EndPort, p.Port.IntVal)})
		default:
			named[p.Port.StrVal] = append(named[p.Port.StrVal], proto)
		}
	}
	var common []string
	if len(numbered) > 0 {
		common = append(common, "meta l4proto . th dport { "+strings.Join(portRanges(numbered), ", ")+" }")
	}
	if len(protocols) > 0 {
		common = append(common, "meta l4proto { "+strings.Join(protocols, ", ")+" }")
	}
	out := map[family][]string{ipv4: common, ipv6: slices.Clone(common)}
	if len(named) == 0 {
		return out
	}
	for _, f := range families {
		name := set + "-named-" + f.name
		b.tx.Add(&knftables.Set{Name: name, Type: f.addr + " . inet_proto . inet_service"})
		seen := map[string]bool{}
		for _, p := range pods {
			for _, c := range p.Spec.Containers {
				for _, cp := range c.Ports {
					if !slices.Contains(named[cp.Name], protocolOf(cp)) {
						continue
					}
					for _, ip := range p.ips {
						key := []string{ip.String(), strings.ToLower(string(protocolOf(cp))), strconv.Itoa(int(cp.ContainerPort))}
						if familyOf(ip) != f || seen[strings.Join(key, " ")] {
							continue
						}
						seen[strings.Join(key, " ")] = true
						b.tx.Add(&knftables.Element{Set: name, Key: key})
					}
				}
			}
		}
		// The address is the selected Pod's (ingress: the destination)
		// or the peer's (egress: the destination too).
		out[f] = append(out[f], knftables.Concat(f.proto, "daddr . meta l4proto . th dport", "@"+name))
	}
	return out
}

// portRanges are the elements of protocols' port ranges, overlapping and
// adjacent ones merged: nftables refuses overlapping intervals in one
// set ("File exists"), and one such policy would fail every change.
func portRanges(protocols map[string][][2]int32) []string {
	var out []string
	for _, l4 := range slices.Sorted(maps.Keys(protocols)) {
		ranges := protocols[l4]
		slices.SortFunc(ranges, func(a, b [2]int32) int { return int(a[0] - b[0]) })
		merged := ranges[:1]
		for _, r := range ranges[1:] {
			if last := &merged[len(merged)-1]; r[0] <= last[1]+1 {
				last[1] = max(last[1], r[1])
			} else {
				merged = append(merged, r)
			}
		}
		for _, r := range merged {
			if r[0] == r[1] {
				out = append(out, fmt.Sprintf("%s . %d", l4, r[0]))
			} else {
				out = append(out, fmt.Sprintf("%s . %d-%d", l4, r[0], r[1]))
			}
		}
	}
	return out
}

func protocolOf(cp corev1.ContainerPort) corev1.Protocol {
	return cmp.Or(cp.Protocol, corev1.ProtocolTCP)
}

// hash names a chain or set after key, short and stable.
func hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
}

// join joins the parts of a rule that are not empty.
func join(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " ")
}
