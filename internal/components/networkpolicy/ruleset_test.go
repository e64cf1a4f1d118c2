//go:build linux

package networkpolicy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

const node = "node-a"

// testPod is a Pod of namespace/name on nodeName with ip, labelled app=name
// and serving port 8080 named "http".
func testPod(namespace, name, nodeName, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// policy selects app=app in namespace, with spec's rules and types.
func policy(namespace, name, app string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	if app == "" {
		spec.PodSelector = metav1.LabelSelector{}
	}
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
}

func policyTypes(t ...networkingv1.PolicyType) []networkingv1.PolicyType { return t }

const (
	in  = networkingv1.PolicyTypeIngress
	out = networkingv1.PolicyTypeEgress
)

// apply writes s's ruleset into a fake table and returns it.
func apply(t *testing.T, s state) *knftables.Fake {
	t.Helper()
	fake := knftables.NewFake(knftables.InetFamily, TableName)
	for range 2 { // the second replaces the first
		tx := fake.NewTransaction()
		if invalid := ruleset(tx, s); len(invalid) > 0 {
			t.Fatalf("invalid: %v", invalid)
		}
		if err := fake.Run(context.Background(), tx); err != nil {
			t.Fatalf("the transaction: %v", err)
		}
	}
	return fake
}

// verdictOf is the chain map's element for ip jumps to, "" if none.
func verdictOf(fake *knftables.Fake, m, ip string) string {
	e := fake.Table.Maps[m].FindElement(ip)
	if e == nil {
		return ""
	}
	return strings.TrimPrefix(e.Value[0], "goto ")
}

func chainRules(fake *knftables.Fake, chain string) []string {
	var out []string
	if c := fake.Table.Chains[chain]; c != nil {
		for _, r := range c.Rules {
			out = append(out, r.Rule)
		}
	}
	return out
}

// setOf is the elements of the set a rule of chain reads with prefix
// ("ip saddr @"), joined.
func setOf(t *testing.T, fake *knftables.Fake, chain, prefix string) []string {
	t.Helper()
	for _, r := range chainRules(fake, chain) {
		if _, after, ok := strings.Cut(r, prefix); ok {
			name, _, _ := strings.Cut(after, " ")
			var elems []string
			for _, e := range fake.Table.Sets[name].Elements {
				elems = append(elems, strings.Join(e.Key, " . "))
			}
			slices.Sort(elems)
			return elems
		}
	}
	t.Fatalf("no rule of %s reads %q...: %q", chain, prefix, chainRules(fake, chain))
	return nil
}

// policyChains are the policy chains a Pod's chain jumps to.
func policyChains(fake *knftables.Fake, podChain string) []string {
	var out []string
	for _, r := range chainRules(fake, podChain) {
		if c, ok := strings.CutPrefix(r, "jump "); ok {
			out = append(out, c)
		}
	}
	return out
}

// TestIsolation: a policy isolates the node's own Pods it selects, in its
// namespace, in the directions of its types; a Pod's chain refuses what
// its policies do not accept.
func TestIsolation(t *testing.T) {
	web := testPod("x", "web", node, "10.42.0.2")
	hostNet := testPod("x", "web", node, "198.51.100.2")
	hostNet.Name, hostNet.Spec.HostNetwork = "host", true
	finished := testPod("x", "web", node, "10.42.0.3")
	finished.Name, finished.Status.Phase = "done", corev1.PodSucceeded
	remote := testPod("x", "web", "node-b", "10.42.1.2")
	remote.Name = "remote"
	otherNS := testPod("y", "web", node, "10.42.0.4")
	pods := []*corev1.Pod{web, hostNet, finished, remote, otherNS}

	for _, tc := range []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		// isolated: map -> the addresses in it.
		isolated map[string][]string
	}{
		{"no policy", nil, map[string][]string{}},
		{"deny all ingress", []*networkingv1.NetworkPolicy{policy("x", "deny", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in)})},
			map[string][]string{"ingress-v4": {"10.42.0.2"}}},
		{"egress only", []*networkingv1.NetworkPolicy{policy("x", "deny", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(out)})},
			map[string][]string{"egress-v4": {"10.42.0.2"}}},
		{"both, every Pod of the namespace", []*networkingv1.NetworkPolicy{policy("x", "deny", "", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in, out)})},
			map[string][]string{"ingress-v4": {"10.42.0.2"}, "egress-v4": {"10.42.0.2"}}},
		{"types left to the defaults: ingress, and egress with egress rules", []*networkingv1.NetworkPolicy{
			policy("x", "in", "web", networkingv1.NetworkPolicySpec{}),
			policy("y", "out", "web", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}}),
		}, map[string][]string{"ingress-v4": {"10.42.0.2", "10.42.0.4"}, "egress-v4": {"10.42.0.4"}}},
		{"a selector matching nobody", []*networkingv1.NetworkPolicy{policy("x", "deny", "nobody", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in)})},
			map[string][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := apply(t, state{node: node, pods: pods, policies: tc.policies})
			for _, m := range []string{"ingress-v4", "egress-v4", "ingress-v6", "egress-v6"} {
				var got []string
				for _, e := range fake.Table.Maps[m].Elements {
					got = append(got, e.Key[0])
					chain := strings.TrimPrefix(e.Value[0], "goto ")
					if r := chainRules(fake, chain); len(r) == 0 || r[len(r)-1] != denyRule {
						t.Errorf("%s: chain %s of %s ends %q, want the refusal", m, chain, e.Key[0], r)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.isolated[m]) {
					t.Errorf("%s holds %q, want %q", m, got, tc.isolated[m])
				}
			}
		})
	}
}

// TestPodChains: Pods the same policies select share a chain, which jumps
// to each policy's; a Pod another policy selects too has its own.
func TestPodChains(t *testing.T) {
	a, b, c := testPod("x", "a", node, "10.42.0.2"), testPod("x", "b", node, "10.42.0.3"), testPod("x", "c", node, "10.42.0.4")
	c.Labels["extra"] = "yes"
	all := policy("x", "all", "", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in)})
	extra := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "extra"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"extra": "yes"}}, PolicyTypes: policyTypes(in)}}
	fake := apply(t, state{node: node, pods: []*corev1.Pod{a, b, c}, policies: []*networkingv1.NetworkPolicy{extra, all}})
	chainA, chainB, chainC := verdictOf(fake, "ingress-v4", "10.42.0.2"), verdictOf(fake, "ingress-v4", "10.42.0.3"), verdictOf(fake, "ingress-v4", "10.42.0.4")
	if chainA == "" || chainA != chainB {
		t.Errorf("a and b: chains %q and %q, want one shared", chainA, chainB)
	}
	if chainC == chainA {
		t.Errorf("c shares a's chain, though another policy selects it")
	}
	if got := policyChains(fake, chainA); len(got) != 1 || fake.Table.Chains[got[0]].Comment == nil || *fake.Table.Chains[got[0]].Comment != "x/all" {
		t.Errorf("a's chain jumps to %q, want x/all's chain", got)
	}
	if got := policyChains(fake, chainC); len(got) != 2 {
		t.Errorf("c's chain jumps to %q, want x/all's and x/extra's", got)
	}
}

// TestPeers: a rule's peers are the Pods its podSelector selects in the
// policy's namespace, those of the namespaces its namespaceSelector
// selects, or both at once; host-network and finished Pods are never
// peers; ipBlocks match their range but the exceptions.
func TestPeers(t *testing.T) {
	web := testPod("x", "web", node, "10.42.0.2")
	clientX := testPod("x", "client", "node-b", "10.42.1.2")
	clientY := testPod("y", "client", "node-b", "10.42.1.3")
	otherY := testPod("y", "other", node, "10.42.0.5")
	clientZ := testPod("z", "client", node, "10.42.0.6")
	hostNet := testPod("y", "client", node, "198.51.100.2")
	hostNet.Name, hostNet.Spec.HostNetwork = "host", true
	finished := testPod("y", "client", node, "10.42.0.7")
	finished.Name, finished.Status.Phase = "done", corev1.PodFailed
	s := state{node: node, pods: []*corev1.Pod{web, clientX, clientY, otherY, clientZ, hostNet, finished},
		namespaces: []*corev1.Namespace{namespace("x", nil), namespace("y", map[string]string{"team": "a"}), namespace("z", map[string]string{"team": "b"})}}
	clients := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	for _, tc := range []struct {
		name string
		peer networkingv1.NetworkPolicyPeer
		want []string
	}{
		{"podSelector: the policy's namespace", networkingv1.NetworkPolicyPeer{PodSelector: clients}, []string{"10.42.1.2"}},
		{"namespaceSelector: every Pod there", networkingv1.NetworkPolicyPeer{NamespaceSelector: teamA}, []string{"10.42.0.5", "10.42.1.3"}},
		{"both", networkingv1.NetworkPolicyPeer{PodSelector: clients, NamespaceSelector: teamA}, []string{"10.42.1.3"}},
		{"empty namespaceSelector: every namespace", networkingv1.NetworkPolicyPeer{PodSelector: clients, NamespaceSelector: &metav1.LabelSelector{}},
			[]string{"10.42.0.6", "10.42.1.2", "10.42.1.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.policies = []*networkingv1.NetworkPolicy{policy("x", "allow", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in, out),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{tc.peer}}},
				Egress:  []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{tc.peer}}},
			})}
			fake := apply(t, s)
			for _, d := range []struct{ m, prefix string }{{"ingress-v4", "ip saddr @"}, {"egress-v4", "ip daddr @"}} {
				chains := policyChains(fake, verdictOf(fake, d.m, "10.42.0.2"))
				if len(chains) != 1 {
					t.Fatalf("%s: web's chain jumps to %q", d.m, chains)
				}
				if got := setOf(t, fake, chains[0], d.prefix); !slices.Equal(got, tc.want) {
					t.Errorf("%s: peers %q, want %q", d.m, got, tc.want)
				}
			}
		})
	}

	t.Run("ipBlock with exceptions", func(t *testing.T) {
		s.policies = []*networkingv1.NetworkPolicy{policy("x", "allow", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.42.0.0/16", Except: []string{"10.42.1.0/24", "10.42.2.7/32"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::1/64"}},
			}}},
		})}
		fake := apply(t, s)
		got := chainRules(fake, policyChains(fake, verdictOf(fake, "ingress-v4", "10.42.0.2"))[0])
		want := []string{"ip saddr 10.42.0.0/16 ip saddr != { 10.42.1.0/24, 10.42.2.7/32 } accept", "ip6 saddr fd00::/64 accept"}
		if !slices.Equal(got, want) {
			t.Errorf("rules %q, want %q", got, want)
		}
	})
}

// TestPorts: numbered ports and ranges of each protocol, protocols alone,
// and named ports, resolved on the selected Pods for ingress and on the
// peers for egress.
func TestPorts(t *testing.T) {
	web := testPod("x", "web", node, "10.42.0.2")
	other := testPod("x", "other", node, "10.42.0.3")
	other.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 9090}}
	remote := testPod("y", "remote", "node-b", "10.42.1.2")
	port := func(proto corev1.Protocol, p intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p, EndPort: end}
	}
	ports := []networkingv1.NetworkPolicyPort{
		{Port: ptr.To(intstr.FromInt32(80))}, // TCP by default
		port(corev1.ProtocolUDP, intstr.FromInt32(53), nil),
		port(corev1.ProtocolSCTP, intstr.FromInt32(7000), ptr.To[int32](7100)),
		{Protocol: ptr.To(corev1.ProtocolUDP)},
		port(corev1.ProtocolTCP, intstr.FromString("http"), nil),
	}
	s := state{node: node, pods: []*corev1.Pod{web, other, remote}, policies: []*networkingv1.NetworkPolicy{
		policy("x", "ports", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in, out),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports}},
			Egress:  []networkingv1.NetworkPolicyEgressRule{{Ports: ports}},
		})}}
	fake := apply(t, s)
	for _, tc := range []struct {
		m     string
		named []string
	}{
		// The named port of the node's Pods the policy selects: web's,
		// not other's.
		{"ingress-v4", []string{"10.42.0.2 . tcp . 8080"}},
		// Any peer's: the rule names no peer.
		{"egress-v4", []string{"10.42.0.2 . tcp . 8080", "10.42.0.3 . tcp . 9090", "10.42.1.2 . tcp . 8080"}},
	} {
		chain := policyChains(fake, verdictOf(fake, tc.m, "10.42.0.2"))[0]
		got := chainRules(fake, chain)
		if !slices.Contains(got, "meta l4proto . th dport { sctp . 7000-7100, tcp . 80, udp . 53 } accept") ||
			!slices.Contains(got, "meta l4proto { udp } accept") {
			t.Errorf("%s: rules %q, want the numbered ports and UDP alone", tc.m, got)
		}
		if named := setOf(t, fake, chain, "ip daddr . meta l4proto . th dport @"); !slices.Equal(named, tc.named) {
			t.Errorf("%s: named ports %q, want %q", tc.m, named, tc.named)
		}
	}
}

// TestRulesetLoads: the ruleset nft itself reads, twice (the second
// replaces the first), in a network namespace of its own.
func TestRulesetLoads(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft (Debian's nftables) is needed: %v", err)
	}
	web := testPod("x", "web", node, "10.42.0.2")
	web6 := testPod("x", "web6", node, "fd00:42::2")
	web6.Labels["app"] = "web"
	peer := testPod("y", "client", "node-b", "10.42.1.2")
	peer.Status.PodIPs = append(peer.Status.PodIPs, corev1.PodIP{IP: "fd00:42:1::2"})
	s := state{node: node, pods: []*corev1.Pod{web, web6, peer}, namespaces: []*corev1.Namespace{namespace("y", map[string]string{"team": "a"})},
		policies: []*networkingv1.NetworkPolicy{policy("x", "all", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in, out),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.128/25"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(80))}, {Port: ptr.To(intstr.FromString("http"))},
					{Protocol: ptr.To(corev1.ProtocolSCTP), Port: ptr.To(intstr.FromInt32(9000)), EndPort: ptr.To[int32](9010)},
					// Overlapping: merged, or nft refuses the set.
					{Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To[int32](8100)}, {Port: ptr.To(intstr.FromInt32(8050))}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
				{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromString("dns"))}}}},
		})},
		// The egress rule allowing dns to anywhere allows the cluster DNS.
		dnsSlices: []*discoveryv1.EndpointSlice{dnsSlice("198.51.100.1", 10053, nil), dnsSlice("fd00:53::1", 10053, nil)},
	}
	tx := knftables.NewFake(knftables.InetFamily, TableName).NewTransaction()
	ruleset(tx, s)
	file := filepath.Join(t.TempDir(), "rules.nft")
	if err := os.WriteFile(file, []byte(tx.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	script := "nft add table inet " + TableName + " && nft -f " + file + " && nft -f " + file + " && nft list table inet " + TableName
	out, err := exec.Command("unshare", "--net", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("nft: %v\n%s\nthe ruleset:\n%s", err, out, tx.String())
	}
	for _, want := range []string{"10.42.0.2 comment \"x/web\" : goto", "fd00:42::2 comment \"x/web6\" : goto", "sctp . 9000-9010", "fd00:42:1::2",
		"ip daddr 198.51.100.1 meta l4proto . th dport { udp . 10053 } accept", "ip6 daddr fd00:53::1 meta l4proto . th dport { udp . 10053 } accept"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the table nft lists has no %q:\n%s", want, out)
		}
	}
}

// TestPortRanges: overlapping and adjacent ranges of a protocol are
// merged, which nftables requires of one set.
func TestPortRanges(t *testing.T) {
	got := portRanges(map[string][][2]int32{
		"tcp": {{85, 85}, {80, 90}, {91, 95}, {100, 100}, {100, 100}},
		"udp": {{53, 53}, {80, 80}},
	})
	want := []string{"tcp . 80-95", "tcp . 100", "udp . 53", "udp . 80"}
	if !slices.Equal(got, want) {
		t.Errorf("portRanges: %q, want %q", got, want)
	}
}

// TestClusterDNS: egress rules judge the cluster DNS a server serves in
// its process (no Pod, port 10053) as the CoreDNS Pod it stands for, in
// kube-system, labelled k8s-app=kube-dns, serving 53 as dns (UDP) and
// dns-tcp (TCP); a kube-dns endpoint that is a Pod is that Pod.
func TestClusterDNS(t *testing.T) {
	udp, tcp := ptr.To(corev1.ProtocolUDP), ptr.To(corev1.ProtocolTCP)
	port := func(p *corev1.Protocol, v intstr.IntOrString) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: p, Port: &v}
	}
	dns53 := []networkingv1.NetworkPolicyPort{port(udp, intstr.FromInt32(53)), port(tcp, intstr.FromInt32(53))}
	kubeSystem := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}
	const both, udpOnly = "ip daddr 198.51.100.1 meta l4proto . th dport { udp . 10053, tcp . 10053 } accept",
		"ip daddr 198.51.100.1 meta l4proto . th dport { udp . 10053 } accept"
	for _, tc := range []struct {
		name   string
		egress []networkingv1.NetworkPolicyEgressRule
		want   []string
	}{
		{"port 53 to anywhere", []networkingv1.NetworkPolicyEgressRule{{Ports: dns53}}, []string{both}},
		{"UDP 53 only", []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(udp, intstr.FromInt32(53))}}}, []string{udpOnly}},
		{"a range holding 53", []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: udp, Port: ptr.To(intstr.FromInt32(50)), EndPort: ptr.To[int32](60)}}}}, []string{udpOnly}},
		{"named port dns", []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(udp, intstr.FromString("dns"))}}}, []string{udpOnly}},
		{"CoreDNS's Pods", []networkingv1.NetworkPolicyEgressRule{{Ports: dns53, To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: kubeSystem, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}}}}}, []string{both}},
		{"kube-system", []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: kubeSystem}}}}, []string{both}},
		{"everything", []networkingv1.NetworkPolicyEgressRule{{}}, []string{both}},
		{"an ipBlock holding it", []networkingv1.NetworkPolicyEgressRule{{Ports: dns53, To: []networkingv1.NetworkPolicyPeer{{
			IPBlock: &networkingv1.IPBlock{CIDR: "198.51.100.0/24"}}}}}, []string{both}},
		{"an ipBlock excepting it", []networkingv1.NetworkPolicyEgressRule{{Ports: dns53, To: []networkingv1.NetworkPolicyPeer{{
			IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"198.51.100.1/32"}}}}}}, nil},
		{"other Pods of kube-system", []networkingv1.NetworkPolicyEgressRule{{Ports: dns53, To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: kubeSystem, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}}}}, nil},
		{"Pods of the policy's namespace", []networkingv1.NetworkPolicyEgressRule{{Ports: dns53, To: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{}}}}}, nil},
		{"another port", []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt32(80))}}}, nil},
		{"TCP 53 and UDP 10053", []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt32(53)), port(udp, intstr.FromInt32(10053))}}},
			[]string{"ip daddr 198.51.100.1 meta l4proto . th dport { tcp . 10053 } accept"}},
		{"no egress", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := policy("x", "p", "client", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(out), Egress: tc.egress})
			fake := apply(t, state{
				node:       node,
				pods:       []*corev1.Pod{testPod("x", "client", node, "10.42.0.2")},
				namespaces: []*corev1.Namespace{namespace("x", nil), namespace("kube-system", map[string]string{"kubernetes.io/metadata.name": "kube-system"})},
				policies:   []*networkingv1.NetworkPolicy{np},
				dnsSlices:  []*discoveryv1.EndpointSlice{dnsSlice("198.51.100.1", 10053, nil), dnsSlice("10.42.0.9", 53, &corev1.ObjectReference{Kind: "Pod"})},
			})
			var got []string
			for _, r := range chainRules(fake, "egress-"+hash("x/p")) {
				if strings.HasPrefix(r, "ip daddr 198.51.100.1 ") || strings.HasPrefix(r, "ip daddr 10.42.0.9 ") {
					got = append(got, r)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rules for the cluster DNS:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// dnsSlice is a kube-dns EndpointSlice with an endpoint at ip serving
// port as dns (UDP) and dns-tcp (TCP), for the Pod ref if not nil.
func dnsSlice(ip string, port int32, ref *corev1.ObjectReference) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-" + ip, Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, TargetRef: ref}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: &port},
			{Name: ptr.To("dns-tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: &port},
		},
	}
}
