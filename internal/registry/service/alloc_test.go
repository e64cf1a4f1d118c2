package service_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

const (
	v4     = corev1.IPv4Protocol
	v6     = corev1.IPv6Protocol
	single = corev1.IPFamilyPolicySingleStack
	prefer = corev1.IPFamilyPolicyPreferDualStack
	dual   = corev1.IPFamilyPolicyRequireDualStack

	cidr4 = "10.0.0.0/24"
	cidr6 = "fd00::/108"
)

var (
	singleStack4 = []string{cidr4}
	singleStack6 = []string{cidr6}
	dualStack46  = []string{cidr4, cidr6}
	dualStack64  = []string{cidr6, cidr4}
)

// IP family defaulting and checks on create, as kube-apiserver's
// initIPFamilyFields.
func TestCreateIPFamilies(t *testing.T) {
	tests := []struct {
		name         string
		cidrs        []string
		svc          *corev1.Service
		wantPolicy   corev1.IPFamilyPolicy
		wantFamilies []corev1.IPFamily
		wantIPs      []string // requested IPs that must be kept; "" for a dynamic one
		wantHeadless bool
		// wantErr is "field: message substring".
		wantErr string
	}{
		{name: "default on single-stack", cidrs: singleStack4, svc: newService("s"),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v4}, wantIPs: []string{""}},
		{name: "default on IPv6 single-stack", cidrs: singleStack6, svc: newService("s"),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v6}, wantIPs: []string{""}},
		{name: "default on dual-stack is single-stack of the primary family", cidrs: dualStack46, svc: newService("s"),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v4}, wantIPs: []string{""}},
		{name: "default on IPv6-primary dual-stack", cidrs: dualStack64, svc: newService("s"),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v6}, wantIPs: []string{""}},
		{name: "PreferDualStack on dual-stack gets both", cidrs: dualStack46, svc: newService("s", withPolicy(prefer)),
			wantPolicy: prefer, wantFamilies: []corev1.IPFamily{v4, v6}, wantIPs: []string{"", ""}},
		{name: "PreferDualStack on single-stack gets one", cidrs: singleStack4, svc: newService("s", withPolicy(prefer)),
			wantPolicy: prefer, wantFamilies: []corev1.IPFamily{v4}, wantIPs: []string{""}},
		{name: "PreferDualStack with IPv6 first", cidrs: dualStack46, svc: newService("s", withPolicy(prefer), withFamilies(v6)),
			wantPolicy: prefer, wantFamilies: []corev1.IPFamily{v6, v4}, wantIPs: []string{"", ""}},
		{name: "RequireDualStack on dual-stack", cidrs: dualStack64, svc: newService("s", withPolicy(dual)),
			wantPolicy: dual, wantFamilies: []corev1.IPFamily{v6, v4}, wantIPs: []string{"", ""}},
		{name: "RequireDualStack with both IPs requested", cidrs: dualStack46, svc: newService("s", withPolicy(dual), withClusterIPs("10.0.0.7", "fd00::7")),
			wantPolicy: dual, wantFamilies: []corev1.IPFamily{v4, v6}, wantIPs: []string{"10.0.0.7", "fd00::7"}},
		{name: "PreferDualStack with the primary IP requested", cidrs: dualStack46, svc: newService("s", withPolicy(prefer), withClusterIPs("10.0.0.8")),
			wantPolicy: prefer, wantFamilies: []corev1.IPFamily{v4, v6}, wantIPs: []string{"10.0.0.8", ""}},
		{name: "a requested IPv6 IP sets the family", cidrs: dualStack46, svc: newService("s", withClusterIPs("fd00::9")),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v6}, wantIPs: []string{"fd00::9"}},
		{name: "an old client's clusterIP alone", cidrs: singleStack4, svc: newService("s", withLegacyClusterIP("10.0.0.10")),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v4}, wantIPs: []string{"10.0.0.10"}},
		{name: "RequireDualStack on single-stack", cidrs: singleStack4, svc: newService("s", withPolicy(dual)),
			wantErr: "spec.ipFamilyPolicy: this cluster is not configured for dual-stack services"},
		{name: "two clusterIPs with SingleStack", cidrs: dualStack46, svc: newService("s", withPolicy(single), withClusterIPs("10.0.0.7", "fd00::7")),
			wantErr: "spec.ipFamilyPolicy: must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"},
		// A create without policy is SingleStack (upstream's comment: "If
		// they didn't specify a policy we can assume it's always
		// SingleStack"), so two IPs are refused the same way.
		{name: "two clusterIPs without policy", cidrs: dualStack46, svc: newService("s", withClusterIPs("10.0.0.7", "fd00::7")),
			wantErr: "spec.ipFamilyPolicy: must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"},
		{name: "two families with SingleStack", cidrs: dualStack46, svc: newService("s", withPolicy(single), withFamilies(v4, v6)),
			wantErr: "spec.ipFamilyPolicy: must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"},
		{name: "an IPv6 IP on an IPv4 cluster", cidrs: singleStack4, svc: newService("s", withClusterIPs("fd00::5")),
			wantErr: "spec.clusterIPs[0]: IPv6 is not configured on this cluster"},
		{name: "an IPv6 family on an IPv4 cluster", cidrs: singleStack4, svc: newService("s", withFamilies(v6)),
			wantErr: "spec.ipFamilies[0]: not configured on this cluster"},
		{name: "IP and family disagree", cidrs: dualStack46, svc: newService("s", withClusterIPs("10.0.0.5"), withFamilies(v6)),
			wantErr: "spec.clusterIPs[0]: expected an IPv6 value as indicated by `ipFamilies[0]`"},

		// Headless: families, no IPs. Headless without a selector defaults
		// to RequireDualStack with both families, on any cluster (the
		// endpoints are the user's; upstream appends the other family
		// whenever the policy is not SingleStack).
		{name: "headless selectorless on dual-stack", cidrs: dualStack46, svc: newService("s", headless, selectorless),
			wantPolicy: dual, wantFamilies: []corev1.IPFamily{v4, v6}, wantHeadless: true},
		{name: "headless selectorless on IPv6-primary dual-stack", cidrs: dualStack64, svc: newService("s", headless, selectorless),
			wantPolicy: dual, wantFamilies: []corev1.IPFamily{v6, v4}, wantHeadless: true},
		{name: "headless selectorless on single-stack", cidrs: singleStack4, svc: newService("s", headless, selectorless),
			wantPolicy: dual, wantFamilies: []corev1.IPFamily{v4, v6}, wantHeadless: true},
		{name: "headless selectorless SingleStack", cidrs: dualStack46, svc: newService("s", headless, selectorless, withPolicy(single)),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v4}, wantHeadless: true},
		{name: "headless with selector", cidrs: dualStack46, svc: newService("s", headless),
			wantPolicy: single, wantFamilies: []corev1.IPFamily{v4}, wantHeadless: true},
		{name: "headless with selector PreferDualStack on single-stack", cidrs: singleStack4, svc: newService("s", headless, withPolicy(prefer)),
			wantPolicy: prefer, wantFamilies: []corev1.IPFamily{v4}, wantHeadless: true},
		{name: "ExternalName has no IP fields", cidrs: dualStack46, svc: newService("s", externalName)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCluster(t, defaultPorts, tt.cidrs...)
			svc := tt.svc.DeepCopy()
			txn, err := c.alloc.Create(ctx, svc, false)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Create succeeded: %+v", svc.Spec)
				}
				st := statusOf(t, err)
				field, msg, _ := strings.Cut(tt.wantErr, ": ")
				if st.Code != 422 || st.Details == nil || len(st.Details.Causes) == 0 {
					t.Fatalf("Create = %v (code %d), want 422 at %s", err, st.Code, field)
				}
				if got := st.Details.Causes[0]; got.Field != field || !strings.Contains(got.Message, msg) {
					t.Errorf("cause %s: %q, want %s: ...%q", got.Field, got.Message, field, msg)
				}
				if held := c.heldIPs(t); len(held) != 0 {
					t.Errorf("a refused create left IPs allocated: %v", held)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			txn.Commit(ctx)
			spec := svc.Spec
			if tt.wantPolicy == "" {
				if spec.IPFamilyPolicy != nil || spec.IPFamilies != nil || spec.ClusterIP != "" || spec.ClusterIPs != nil {
					t.Errorf("IP fields set: policy %v families %v clusterIPs %q/%v", spec.IPFamilyPolicy, spec.IPFamilies, spec.ClusterIP, spec.ClusterIPs)
				}
			} else if spec.IPFamilyPolicy == nil || *spec.IPFamilyPolicy != tt.wantPolicy {
				t.Errorf("ipFamilyPolicy = %v, want %s", ptr.Deref(spec.IPFamilyPolicy, "<nil>"), tt.wantPolicy)
			}
			if !slices.Equal(spec.IPFamilies, tt.wantFamilies) {
				t.Errorf("ipFamilies = %v, want %v", spec.IPFamilies, tt.wantFamilies)
			}
			var wantHeld []string
			switch {
			case tt.wantHeadless:
				if spec.ClusterIP != "None" || !slices.Equal(spec.ClusterIPs, []string{"None"}) {
					t.Errorf("clusterIP %q, clusterIPs %v; want None", spec.ClusterIP, spec.ClusterIPs)
				}
			case tt.wantPolicy != "":
				if len(spec.ClusterIPs) != len(tt.wantIPs) || spec.ClusterIP != spec.ClusterIPs[0] {
					t.Fatalf("clusterIP %q, clusterIPs %v; want %d IPs, the first in clusterIP", spec.ClusterIP, spec.ClusterIPs, len(tt.wantIPs))
				}
				for i, ip := range spec.ClusterIPs {
					addr, err := netip.ParseAddr(ip)
					if err != nil {
						t.Fatalf("clusterIPs[%d] = %q", i, ip)
					}
					if (spec.IPFamilies[i] == v4) != addr.Is4() {
						t.Errorf("clusterIPs[%d] = %s is not of family %s", i, ip, spec.IPFamilies[i])
					}
					if tt.wantIPs[i] != "" && ip != tt.wantIPs[i] {
						t.Errorf("clusterIPs[%d] = %s, want the requested %s", i, ip, tt.wantIPs[i])
					}
					if owner := c.owner(t, ip); owner != "default/s" {
						t.Errorf("IPAddress %s owned by %q, want default/s", ip, owner)
					}
					wantHeld = append(wantHeld, ip)
				}
			}
			slices.Sort(wantHeld)
			if held := c.heldIPs(t); !slices.Equal(held, wantHeld) {
				t.Errorf("allocated IPs %v, want %v", held, wantHeld)
			}
		})
	}
}

// Dynamic ClusterIPs come from the upper part of the range: a /24 keeps
// .1-.16 for requested IPs.
func TestCreateDynamicClusterIPsAvoidTheStaticBand(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, defaultPorts, "10.0.0.0/24", "fd00::/120")
	for i := 0; i < 20; i++ {
		svc := newService(fmt.Sprintf("s%d", i), withPolicy(dual))
		if _, err := c.alloc.Create(ctx, svc, false); err != nil {
			t.Fatal(err)
		}
		for _, ip := range svc.Spec.ClusterIPs {
			a := netip.MustParseAddr(ip)
			low := a.As16()[15]
			if low <= 16 {
				t.Errorf("%s got %s, in the static band", svc.Name, ip)
			}
		}
	}
}

// Allocation failures, with the status kube-apiserver answers (see
// /work/shared/reference/kube-apiserver-1.36/status-bodies.txt and
// pkg/registry/core/service/storage/alloc.go), and nothing left allocated.
func TestCreateAllocationErrors(t *testing.T) {
	tests := []struct {
		name  string
		cidrs []string
		ports string
		// setup allocates before the failing create.
		setup    []*corev1.Service
		svc      *corev1.Service
		wantCode int32
		wantMsg  string // the whole Status message
		// wantField is the cause's field; "" for an internal error.
		wantField string
	}{
		{name: "requested IP already allocated", cidrs: singleStack4, ports: defaultPorts,
			setup: []*corev1.Service{newService("a", withClusterIPs("10.0.0.50"))},
			svc:   newService("b", withClusterIPs("10.0.0.50")), wantCode: 422, wantField: "spec.clusterIPs",
			wantMsg: `Service "b" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.50"]: failed to allocate IP 10.0.0.50: provided IP is already allocated`},
		{name: "requested IP outside the range", cidrs: singleStack4, ports: defaultPorts,
			svc: newService("b", withClusterIPs("203.0.113.7")), wantCode: 422, wantField: "spec.clusterIPs",
			wantMsg: `Service "b" is invalid: spec.clusterIPs: Invalid value: ["203.0.113.7"]: failed to allocate IP 203.0.113.7: the provided network does not match the current range`},
		{name: "requested network address", cidrs: singleStack4, ports: defaultPorts,
			svc: newService("b", withClusterIPs("10.0.0.0")), wantCode: 422, wantField: "spec.clusterIPs",
			wantMsg: `Service "b" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.0"]: failed to allocate IP 10.0.0.0: the provided IP (10.0.0.0) is not in the valid range. The range of valid IPs is 10.0.0.0/24`},
		{name: "requested secondary IP taken leaves the primary free", cidrs: dualStack46, ports: defaultPorts,
			setup: []*corev1.Service{newService("a", withClusterIPs("fd00::50"))},
			svc:   newService("b", withPolicy(dual), withClusterIPs("10.0.0.60", "fd00::50")), wantCode: 422, wantField: "spec.clusterIPs",
			wantMsg: `Service "b" is invalid: spec.clusterIPs: Invalid value: ["10.0.0.60","fd00::50"]: failed to allocate IP fd00::50: provided IP is already allocated`},
		{name: "requested node port already allocated", cidrs: singleStack4, ports: defaultPorts,
			setup:    []*corev1.Service{newService("a", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, corev1.ProtocolTCP, 31715)))},
			svc:      newService("b", ofType(corev1.ServiceTypeNodePort), withClusterIPs("10.0.0.61"), withPorts(port("http", 80, corev1.ProtocolTCP, 31715))),
			wantCode: 422, wantField: "spec.ports[0].nodePort",
			wantMsg: `Service "b" is invalid: spec.ports[0].nodePort: Invalid value: 31715: provided port is already allocated`},
		{name: "second node port taken", cidrs: singleStack4, ports: defaultPorts,
			setup: []*corev1.Service{newService("a", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, corev1.ProtocolTCP, 31716)))},
			svc: newService("b", ofType(corev1.ServiceTypeNodePort), withPorts(
				port("http", 80, corev1.ProtocolTCP, 0), port("https", 443, corev1.ProtocolTCP, 31716))),
			wantCode: 422, wantField: "spec.ports[1].nodePort",
			wantMsg: `Service "b" is invalid: spec.ports[1].nodePort: Invalid value: 31716: provided port is already allocated`},
		{name: "node port outside the range", cidrs: singleStack4, ports: defaultPorts,
			svc:      newService("b", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, corev1.ProtocolTCP, 80))),
			wantCode: 422, wantField: "spec.ports[0].nodePort",
			wantMsg: `Service "b" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767`},

		// Full ranges are internal errors (500) upstream (alloc.go: "TODO:
		// what error should be returned here?"); kubeboot's contract
		// (SPEC §5) is a 422 with upstream's "range is full", like every
		// other refused allocation.
		{name: "ClusterIP range full", cidrs: []string{"10.0.0.0/29"}, ports: defaultPorts,
			setup: []*corev1.Service{
				newService("a1"), newService("a2"), newService("a3"), newService("a4"), newService("a5"), newService("a6")},
			svc: newService("b"), wantCode: 422, wantField: "spec.clusterIPs",
			wantMsg: `Service "b" is invalid: spec.clusterIPs: Invalid value: []: failed to allocate a serviceIP: range is full`},
		{name: "NodePort range full", cidrs: singleStack4, ports: "30000-30003",
			setup: []*corev1.Service{newService("a", ofType(corev1.ServiceTypeNodePort), withPorts(
				port("p1", 1, corev1.ProtocolTCP, 0), port("p2", 2, corev1.ProtocolTCP, 0), port("p3", 3, corev1.ProtocolTCP, 0), port("p4", 4, corev1.ProtocolTCP, 0)))},
			svc: newService("b", ofType(corev1.ServiceTypeNodePort)), wantCode: 422, wantField: "spec.ports[0].nodePort",
			wantMsg: `Service "b" is invalid: spec.ports[0].nodePort: Invalid value: 0: failed to allocate a nodePort: range is full`},
		{name: "requested health check node port taken", cidrs: singleStack4, ports: defaultPorts,
			setup: []*corev1.Service{newService("a", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, corev1.ProtocolTCP, 30500)))},
			svc:   newService("b", localTraffic, func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30500 }), wantCode: 422, wantField: "spec.healthCheckNodePort",
			wantMsg: `Service "b" is invalid: spec.healthCheckNodePort: Invalid value: 30500: provided port is already allocated`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCluster(t, tt.ports, tt.cidrs...)
			for _, s := range tt.setup {
				txn, err := c.alloc.Create(ctx, s, false)
				if err != nil {
					t.Fatalf("setup %s: %v", s.Name, err)
				}
				txn.Commit(ctx)
			}
			ipsBefore, portsBefore := c.heldIPs(t), c.heldPorts(t)
			svc := tt.svc.DeepCopy()
			_, err := c.alloc.Create(ctx, svc, false)
			if err == nil {
				t.Fatalf("Create succeeded: %+v", svc.Spec)
			}
			st := statusOf(t, err)
			if st.Code != tt.wantCode || st.Message != tt.wantMsg {
				t.Errorf("Create = %d %q\nwant      %d %q", st.Code, st.Message, tt.wantCode, tt.wantMsg)
			}
			if tt.wantField != "" && (st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != tt.wantField) {
				t.Errorf("causes %+v, want one at %s", st.Details, tt.wantField)
			}
			if got := c.heldIPs(t); !slices.Equal(got, ipsBefore) {
				t.Errorf("IPs allocated %v, before the failed create %v", got, ipsBefore)
			}
			if got := c.heldPorts(t); !slices.Equal(got, portsBefore) {
				t.Errorf("ports allocated %v, before the failed create %v", got, portsBefore)
			}
		})
	}
}

func TestCreateNodePorts(t *testing.T) {
	const static = 30000 + 86 // 30000-30085 are kept for requested ports
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	tests := []struct {
		name string
		svc  *corev1.Service
		// want lists the expected NodePort of each port: a number, 0 for
		// none, -1 for "a dynamic one", -2 for "the same as port 0".
		want []int
		// wantHC is the health check NodePort: 0 none, -1 dynamic, or a number.
		wantHC int
	}{
		{name: "ClusterIP has none", svc: newService("s"), want: []int{0}},
		{name: "NodePort, two ports", svc: newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, tcp, 0), port("https", 443, tcp, 0))),
			want: []int{-1, -1}},
		{name: "NodePort, requested port", svc: newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, tcp, 30080))),
			want: []int{30080}},
		{name: "NodePort, requested port in the upper part", svc: newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, tcp, 32000), port("https", 443, tcp, 0))),
			want: []int{32000, -1}},
		{name: "same port number over TCP and UDP shares one node port", svc: newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("dns-tcp", 53, tcp, 0), port("dns-udp", 53, udp, 0))),
			want: []int{-1, -2}},
		{name: "the requested node port of the second is shared with the first", svc: newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("dns-tcp", 53, tcp, 0), port("dns-udp", 53, udp, 30053))),
			want: []int{30053, 30053}},
		{name: "LoadBalancer gets node ports", svc: newService("s", ofType(corev1.ServiceTypeLoadBalancer)), want: []int{-1}},
		{name: "LoadBalancer without node ports", svc: newService("s", ofType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }),
			want: []int{0}},
		{name: "LoadBalancer without node ports keeps requested ones", svc: newService("s", ofType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
			s.Spec.Ports = []corev1.ServicePort{port("http", 80, tcp, 30081), port("https", 443, tcp, 0)}
		}), want: []int{30081, 0}},
		{name: "LoadBalancer Local gets a health check port", svc: newService("s", localTraffic), want: []int{-1}, wantHC: -1},
		{name: "LoadBalancer Local with a requested health check port", svc: newService("s", localTraffic, func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30999 }),
			want: []int{-1}, wantHC: 30999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCluster(t, defaultPorts, cidr4)
			svc := tt.svc.DeepCopy()
			txn, err := c.alloc.Create(ctx, svc, false)
			if err != nil {
				t.Fatal(err)
			}
			txn.Commit(ctx)
			got := nodePorts(svc)
			for i, w := range tt.want {
				switch {
				case w == -1 && (got[i] <= static || got[i] > 32767):
					t.Errorf("ports[%d].nodePort = %d, want a dynamic port above the static band", i, got[i])
				case w == -2 && got[i] != got[0]:
					t.Errorf("ports[%d].nodePort = %d, want ports[0]'s %d", i, got[i], got[0])
				case w >= 0 && got[i] != w:
					t.Errorf("ports[%d].nodePort = %d, want %d", i, got[i], w)
				}
			}
			hc := int(svc.Spec.HealthCheckNodePort)
			switch {
			case tt.wantHC == -1 && (hc <= static || slices.Contains(got, hc)):
				t.Errorf("healthCheckNodePort = %d, want a dynamic port of its own", hc)
			case tt.wantHC >= 0 && hc != tt.wantHC:
				t.Errorf("healthCheckNodePort = %d, want %d", hc, tt.wantHC)
			}
			if held, want := c.heldPorts(t), sortedUnique(append(got, hc)...); !slices.Equal(held, want) {
				t.Errorf("allocated node ports %v, want %v", held, want)
			}
		})
	}
}

// Revert after a failed write frees everything the create took; Commit
// keeps it.
func TestCreateRevertAndCommit(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, defaultPorts, dualStack46...)
	mk := func(name string) *corev1.Service {
		return newService(name, localTraffic, withPolicy(dual), withPorts(
			port("http", 80, corev1.ProtocolTCP, 0), port("https", 443, corev1.ProtocolTCP, 31443)))
	}
	failed := mk("failed")
	txn, err := c.alloc.Create(ctx, failed, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.heldIPs(t)) != 2 || len(c.heldPorts(t)) != 3 {
		t.Fatalf("before revert: IPs %v, ports %v; want 2 and 3", c.heldIPs(t), c.heldPorts(t))
	}
	txn.Revert(ctx)
	if ips, ports := c.heldIPs(t), c.heldPorts(t); len(ips) != 0 || len(ports) != 0 {
		t.Errorf("after revert: IPs %v, ports %v still allocated", ips, ports)
	}

	kept := mk("kept")
	txn, err = c.alloc.Create(ctx, kept, false)
	if err != nil {
		t.Fatal(err)
	}
	txn.Commit(ctx)
	wantIPs := slices.Clone(kept.Spec.ClusterIPs)
	slices.Sort(wantIPs)
	if ips := c.heldIPs(t); !slices.Equal(ips, wantIPs) {
		t.Errorf("after commit: IPs %v, want %v", ips, wantIPs)
	}
	if ports, want := c.heldPorts(t), sortedUnique(append(nodePorts(kept), int(kept.Spec.HealthCheckNodePort))...); !slices.Equal(ports, want) {
		t.Errorf("after commit: ports %v, want %v", ports, want)
	}
}

func TestCreateDryRun(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, defaultPorts, dualStack46...)
	svc := newService("s", localTraffic, withPolicy(prefer), withPorts(port("http", 80, corev1.ProtocolTCP, 0), port("https", 443, corev1.ProtocolTCP, 31443)))
	txn, err := c.alloc.Create(ctx, svc, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 || svc.Spec.Ports[0].NodePort == 0 || svc.Spec.Ports[1].NodePort != 31443 || svc.Spec.HealthCheckNodePort == 0 {
		t.Errorf("a dry run should fill what a create would: %+v", svc.Spec)
	}
	txn.Commit(ctx)
	txn.Revert(ctx)
	if ips, ports := c.heldIPs(t), c.heldPorts(t); len(ips) != 0 || len(ports) != 0 {
		t.Errorf("a dry run allocated IPs %v, ports %v", ips, ports)
	}
	// A dry run still refuses what a create would.
	taken := newService("taken", withClusterIPs("10.0.0.99"))
	if _, err := c.alloc.Create(ctx, taken, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.alloc.Create(ctx, newService("again", withClusterIPs("10.0.0.99")), true); err == nil || statusOf(t, err).Code != 422 {
		t.Errorf("dry run of a taken IP = %v, want 422", err)
	}
}

// create makes a committed Service on c.
func create(t *testing.T, c *cluster, svc *corev1.Service) *corev1.Service {
	t.Helper()
	txn, err := c.alloc.Create(context.Background(), svc, false)
	if err != nil {
		t.Fatalf("creating %s: %v", svc.Name, err)
	}
	txn.Commit(context.Background())
	return svc
}

func TestUpdateNodePorts(t *testing.T) {
	tcp := corev1.ProtocolTCP
	tests := []struct {
		name   string
		old    *corev1.Service
		change func(*corev1.Service)
		// commit, or revert (a failed write).
		commit bool
		// check gets the old and new Service; held ports are checked
		// after Update (before commit/revert) and after.
		wantNew         func(t *testing.T, old, svc *corev1.Service)
		heldBeforeFinal func(old, svc *corev1.Service) []int
		heldAfterFinal  func(old, svc *corev1.Service) []int
	}{
		{
			name: "ClusterIP to NodePort allocates, commit keeps", commit: true,
			old:    newService("s"),
			change: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort },
			wantNew: func(t *testing.T, old, svc *corev1.Service) {
				if svc.Spec.Ports[0].NodePort == 0 || svc.Spec.ClusterIP != old.Spec.ClusterIP {
					t.Errorf("after update: nodePort %d, clusterIP %s (was %s)", svc.Spec.Ports[0].NodePort, svc.Spec.ClusterIP, old.Spec.ClusterIP)
				}
			},
			heldBeforeFinal: func(_, svc *corev1.Service) []int { return nodePorts(svc) },
			heldAfterFinal:  func(_, svc *corev1.Service) []int { return nodePorts(svc) },
		},
		{
			name: "ClusterIP to NodePort, revert frees", commit: false,
			old:             newService("s"),
			change:          func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort },
			heldBeforeFinal: func(_, svc *corev1.Service) []int { return nodePorts(svc) },
			heldAfterFinal:  func(_, _ *corev1.Service) []int { return nil },
		},
		{
			name: "NodePort to ClusterIP frees on commit, not before", commit: true,
			old: newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, tcp, 0), port("https", 443, tcp, 30443))),
			change: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeClusterIP
				for i := range s.Spec.Ports {
					s.Spec.Ports[i].NodePort = 0
				}
			},
			heldBeforeFinal: func(old, _ *corev1.Service) []int { return sortedUnique(nodePorts(old)...) },
			heldAfterFinal:  func(_, _ *corev1.Service) []int { return nil },
		},
		{
			name: "NodePort to ClusterIP, revert keeps the ports", commit: false,
			old: newService("s", ofType(corev1.ServiceTypeNodePort)),
			change: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeClusterIP
				s.Spec.Ports[0].NodePort = 0
			},
			heldBeforeFinal: func(old, _ *corev1.Service) []int { return nodePorts(old) },
			heldAfterFinal:  func(old, _ *corev1.Service) []int { return nodePorts(old) },
		},
		{
			name: "changing a requested node port", commit: true,
			old:             newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, tcp, 30080))),
			change:          func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30081 },
			heldBeforeFinal: func(_, _ *corev1.Service) []int { return []int{30080, 30081} },
			heldAfterFinal:  func(_, _ *corev1.Service) []int { return []int{30081} },
		},
		{
			name: "adding a port allocates only its node port", commit: true,
			old: newService("s", ofType(corev1.ServiceTypeNodePort)),
			change: func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, port("https", 443, tcp, 0))
			},
			wantNew: func(t *testing.T, old, svc *corev1.Service) {
				if svc.Spec.Ports[0].NodePort != old.Spec.Ports[0].NodePort || svc.Spec.Ports[1].NodePort == 0 || svc.Spec.Ports[1].NodePort == old.Spec.Ports[0].NodePort {
					t.Errorf("node ports %v (were %v)", nodePorts(svc), nodePorts(old))
				}
			},
			heldBeforeFinal: func(_, svc *corev1.Service) []int { return sortedUnique(nodePorts(svc)...) },
			heldAfterFinal:  func(_, svc *corev1.Service) []int { return sortedUnique(nodePorts(svc)...) },
		},
		{
			name: "removing a port frees its node port on commit", commit: true,
			old:             newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, tcp, 30080), port("https", 443, tcp, 30443))),
			change:          func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[:1] },
			heldBeforeFinal: func(_, _ *corev1.Service) []int { return []int{30080, 30443} },
			heldAfterFinal:  func(_, _ *corev1.Service) []int { return []int{30080} },
		},
		{
			name: "NodePort to ExternalName frees on commit", commit: true,
			old: newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, tcp, 30080))),
			change: func(s *corev1.Service) {
				externalName(s)
				s.Spec.Ports[0].NodePort = 0
			},
			heldBeforeFinal: func(_, _ *corev1.Service) []int { return []int{30080} },
			heldAfterFinal:  func(_, _ *corev1.Service) []int { return nil },
		},
		{
			name: "LoadBalancer Local to Cluster frees the health check port on commit", commit: true,
			old: newService("s", localTraffic, withPorts(port("http", 80, tcp, 30080)), func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30999 }),
			change: func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
				s.Spec.HealthCheckNodePort = 0
			},
			heldBeforeFinal: func(_, _ *corev1.Service) []int { return []int{30080, 30999} },
			heldAfterFinal:  func(_, _ *corev1.Service) []int { return []int{30080} },
		},
		{
			name: "LoadBalancer Cluster to Local allocates a health check port", commit: true,
			old:    newService("s", ofType(corev1.ServiceTypeLoadBalancer), withPorts(port("http", 80, tcp, 30080))),
			change: func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal },
			wantNew: func(t *testing.T, _, svc *corev1.Service) {
				if svc.Spec.HealthCheckNodePort == 0 || svc.Spec.HealthCheckNodePort == 30080 {
					t.Errorf("healthCheckNodePort = %d", svc.Spec.HealthCheckNodePort)
				}
			},
			heldBeforeFinal: func(_, svc *corev1.Service) []int { return sortedUnique(30080, int(svc.Spec.HealthCheckNodePort)) },
			heldAfterFinal:  func(_, svc *corev1.Service) []int { return sortedUnique(30080, int(svc.Spec.HealthCheckNodePort)) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCluster(t, defaultPorts, cidr4)
			old := create(t, c, tt.old.DeepCopy())
			svc := old.DeepCopy()
			tt.change(svc)
			txn, err := c.alloc.Update(ctx, svc, old, false)
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if tt.wantNew != nil {
				tt.wantNew(t, old, svc)
			}
			if got, want := c.heldPorts(t), tt.heldBeforeFinal(old, svc); !slices.Equal(got, want) {
				t.Errorf("after Update: node ports %v, want %v", got, want)
			}
			if tt.commit {
				txn.Commit(ctx)
			} else {
				txn.Revert(ctx)
			}
			if got, want := c.heldPorts(t), tt.heldAfterFinal(old, svc); !slices.Equal(got, want) {
				t.Errorf("after %s: node ports %v, want %v", map[bool]string{true: "Commit", false: "Revert"}[tt.commit], got, want)
			}
			// The ClusterIP is untouched unless the Service left or became ExternalName.
			if svc.Spec.Type != corev1.ServiceTypeExternalName && c.owner(t, old.Spec.ClusterIP) != "default/s" {
				t.Errorf("the ClusterIP %s was released", old.Spec.ClusterIP)
			}
		})
	}
}

func TestUpdateClusterIPs(t *testing.T) {
	tests := []struct {
		name   string
		cidrs  []string
		old    *corev1.Service
		change func(*corev1.Service)
		commit bool
		// wantIPs is the new Service's clusterIPs: "old0", "old1" for the
		// old ones, "" for a new dynamic one, or an address.
		wantIPs      []string
		wantFamilies []corev1.IPFamily
		// held IPs after Update and after commit/revert, same notation.
		heldBefore, heldAfter []string
		wantErr               string
	}{
		{name: "upgrade to PreferDualStack allocates the secondary", cidrs: dualStack46, commit: true,
			old: newService("s"), change: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr.To(prefer) },
			wantIPs: []string{"old0", ""}, wantFamilies: []corev1.IPFamily{v4, v6},
			heldBefore: []string{"old0", "new1"}, heldAfter: []string{"old0", "new1"}},
		{name: "upgrade, revert frees the secondary", cidrs: dualStack46, commit: false,
			old: newService("s"), change: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr.To(dual) },
			wantIPs: []string{"old0", ""}, wantFamilies: []corev1.IPFamily{v4, v6},
			heldBefore: []string{"old0", "new1"}, heldAfter: []string{"old0"}},
		{name: "upgrade with a requested secondary", cidrs: dualStack46, commit: true,
			old: newService("s"), change: func(s *corev1.Service) {
				s.Spec.IPFamilyPolicy = ptr.To(dual)
				s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::77")
			},
			wantIPs: []string{"old0", "fd00::77"}, wantFamilies: []corev1.IPFamily{v4, v6},
			heldBefore: []string{"old0", "fd00::77"}, heldAfter: []string{"old0", "fd00::77"}},
		{name: "upgrade on single-stack fails", cidrs: singleStack4,
			old: newService("s"), change: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr.To(dual) },
			wantErr: "this cluster is not configured for dual-stack services"},
		{name: "downgrade by setting SingleStack frees the secondary on commit", cidrs: dualStack46, commit: true,
			old: newService("s", withPolicy(dual)), change: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr.To(single) },
			wantIPs: []string{"old0"}, wantFamilies: []corev1.IPFamily{v4},
			heldBefore: []string{"old0", "old1"}, heldAfter: []string{"old0"}},
		{name: "downgrade, revert keeps the secondary", cidrs: dualStack46, commit: false,
			old: newService("s", withPolicy(prefer)), change: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr.To(single) },
			wantIPs: []string{"old0"}, wantFamilies: []corev1.IPFamily{v4},
			heldBefore: []string{"old0", "old1"}, heldAfter: []string{"old0", "old1"}},
		{name: "dropping the secondary IP without SingleStack", cidrs: dualStack46,
			old: newService("s", withPolicy(prefer)), change: func(s *corev1.Service) {
				s.Spec.ClusterIPs = s.Spec.ClusterIPs[:1]
				s.Spec.IPFamilies = s.Spec.IPFamilies[:1]
			},
			wantErr: "must be 'SingleStack' to release the secondary cluster IP"},
		{name: "no change keeps everything", cidrs: dualStack46, commit: true,
			old: newService("s", withPolicy(dual)), change: func(s *corev1.Service) { s.Labels = map[string]string{"x": "y"} },
			wantIPs: []string{"old0", "old1"}, wantFamilies: []corev1.IPFamily{v4, v6},
			heldBefore: []string{"old0", "old1"}, heldAfter: []string{"old0", "old1"}},
		{name: "to ExternalName wipes the fields and frees on commit", cidrs: dualStack46, commit: true,
			old: newService("s", withPolicy(dual)), change: externalName,
			heldBefore: []string{"old0", "old1"}, heldAfter: nil},
		{name: "to ExternalName, revert keeps the IPs", cidrs: dualStack46, commit: false,
			old: newService("s"), change: externalName,
			heldBefore: []string{"old0"}, heldAfter: []string{"old0"}},
		{name: "from ExternalName allocates", cidrs: dualStack46, commit: true,
			old: newService("s", externalName), change: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeClusterIP
				s.Spec.ExternalName = ""
				s.Spec.Selector = map[string]string{"app": "s"}
			},
			wantIPs: []string{""}, wantFamilies: []corev1.IPFamily{v4},
			heldBefore: []string{"new0"}, heldAfter: []string{"new0"}},
		{name: "from ExternalName with a requested IP, revert frees it", cidrs: dualStack46, commit: false,
			old: newService("s", externalName), change: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeClusterIP
				s.Spec.ExternalName = ""
				s.Spec.ClusterIP = "10.0.0.88"
			},
			wantIPs: []string{"10.0.0.88"}, wantFamilies: []corev1.IPFamily{v4},
			heldBefore: []string{"10.0.0.88"}, heldAfter: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCluster(t, defaultPorts, tt.cidrs...)
			old := create(t, c, tt.old.DeepCopy())
			before := c.heldIPs(t)
			svc := old.DeepCopy()
			tt.change(svc)
			txn, err := c.alloc.Update(ctx, svc, old, false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Update = %v, want an error with %q", err, tt.wantErr)
				}
				if got := c.heldIPs(t); !slices.Equal(got, before) {
					t.Errorf("a refused update changed the IPs: %v -> %v", before, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			resolve := func(list []string) []string {
				var out []string
				for i, s := range list {
					switch {
					case s == "old0" || s == "old1":
						out = append(out, old.Spec.ClusterIPs[s[3]-'0'])
					case s == "new0" || s == "new1":
						out = append(out, svc.Spec.ClusterIPs[s[3]-'0'])
					case s == "":
						out = append(out, svc.Spec.ClusterIPs[i])
					default:
						out = append(out, s)
					}
				}
				return out
			}
			if svc.Spec.Type == corev1.ServiceTypeExternalName {
				if svc.Spec.ClusterIP != "" || svc.Spec.ClusterIPs != nil || svc.Spec.IPFamilies != nil || svc.Spec.IPFamilyPolicy != nil {
					t.Errorf("ExternalName kept IP fields: %q %v %v %v", svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy)
				}
			} else {
				if len(svc.Spec.ClusterIPs) != len(tt.wantIPs) {
					t.Fatalf("clusterIPs = %v, want %d", svc.Spec.ClusterIPs, len(tt.wantIPs))
				}
				if want := resolve(tt.wantIPs); !slices.Equal(svc.Spec.ClusterIPs, want) || svc.Spec.ClusterIP != want[0] {
					t.Errorf("clusterIP %s, clusterIPs %v; want %v", svc.Spec.ClusterIP, svc.Spec.ClusterIPs, want)
				}
				for i, ip := range svc.Spec.ClusterIPs {
					if !strings.Contains(ip, map[corev1.IPFamily]string{v4: ".", v6: ":"}[svc.Spec.IPFamilies[i]]) {
						t.Errorf("clusterIPs[%d] = %s is not %s", i, ip, svc.Spec.IPFamilies[i])
					}
				}
				if !slices.Equal(svc.Spec.IPFamilies, tt.wantFamilies) {
					t.Errorf("ipFamilies = %v, want %v", svc.Spec.IPFamilies, tt.wantFamilies)
				}
			}
			sorted := func(l []string) []string { l = slices.Clone(l); slices.Sort(l); return l }
			if got, want := c.heldIPs(t), sorted(resolve(tt.heldBefore)); !slices.Equal(got, want) {
				t.Errorf("after Update: IPs %v, want %v", got, want)
			}
			if tt.commit {
				txn.Commit(ctx)
			} else {
				txn.Revert(ctx)
			}
			if got, want := c.heldIPs(t), sorted(resolve(tt.heldAfter)); !slices.Equal(got, want) {
				t.Errorf("after %s: IPs %v, want %v", map[bool]string{true: "Commit", false: "Revert"}[tt.commit], got, want)
			}
		})
	}
}

// A dry-run update fills in what it would allocate but neither allocates
// nor, on commit, releases.
func TestUpdateDryRun(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, defaultPorts, dualStack46...)
	old := create(t, c, newService("s", ofType(corev1.ServiceTypeNodePort), withPorts(port("http", 80, corev1.ProtocolTCP, 30080))))
	svc := old.DeepCopy()
	svc.Spec.IPFamilyPolicy = ptr.To(prefer)
	svc.Spec.Ports = append(svc.Spec.Ports, port("https", 443, corev1.ProtocolTCP, 0))
	svc.Spec.Ports[0].NodePort = 30081
	txn, err := c.alloc.Update(ctx, svc, old, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 || svc.Spec.Ports[1].NodePort == 0 {
		t.Errorf("dry-run update did not fill the new values: %v %v", svc.Spec.ClusterIPs, nodePorts(svc))
	}
	txn.Commit(ctx)
	if ips := c.heldIPs(t); !slices.Equal(ips, []string{old.Spec.ClusterIP}) {
		t.Errorf("IPs %v, want only %s", ips, old.Spec.ClusterIP)
	}
	if ports := c.heldPorts(t); !slices.Equal(ports, []int{30080}) {
		t.Errorf("ports %v, want only 30080", ports)
	}
}

// A PreferDualStack Service is not upgraded or downgraded behind its
// owner's back when the cluster gains or loses its second range: upstream
// (isMatchingPreferDualStackClusterIPFields) leaves it as it is on any
// update that does not touch its IP fields.
func TestUpdatePreferDualStackAfterTheClusterChanged(t *testing.T) {
	ctx := context.Background()
	t.Run("cluster became dual-stack", func(t *testing.T) {
		before := newCluster(t, defaultPorts, singleStack4...)
		old := create(t, before, newService("s", withPolicy(prefer)))
		after := apiserver(t, before.prefix, defaultPorts, dualStack46...)
		svc := old.DeepCopy()
		svc.Labels = map[string]string{"touched": "yes"}
		txn, err := after.alloc.Update(ctx, svc, old, false)
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		txn.Commit(ctx)
		if !slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) || !slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) {
			t.Errorf("a label change upgraded the Service: families %v -> %v, clusterIPs %v -> %v",
				old.Spec.IPFamilies, svc.Spec.IPFamilies, old.Spec.ClusterIPs, svc.Spec.ClusterIPs)
		}
		if held := after.heldIPs(t); !slices.Equal(held, old.Spec.ClusterIPs) {
			t.Errorf("IPs held %v, want only %v", held, old.Spec.ClusterIPs)
		}
	})
	t.Run("cluster became single-stack", func(t *testing.T) {
		before := newCluster(t, defaultPorts, dualStack46...)
		old := create(t, before, newService("s", withPolicy(prefer)))
		after := apiserver(t, before.prefix, defaultPorts, singleStack4...)
		svc := old.DeepCopy()
		svc.Labels = map[string]string{"touched": "yes"}
		txn, err := after.alloc.Update(ctx, svc, old, false)
		if err != nil {
			t.Fatalf("a label change of a PreferDualStack Service failed: %v", err)
		}
		txn.Commit(ctx)
		if !slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) || !slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) {
			t.Errorf("families %v -> %v, clusterIPs %v -> %v", old.Spec.IPFamilies, svc.Spec.IPFamilies, old.Spec.ClusterIPs, svc.Spec.ClusterIPs)
		}
	})
}

func TestRelease(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		svc  *corev1.Service
	}{
		{name: "ClusterIP", svc: newService("s")},
		{name: "dual-stack", svc: newService("s", withPolicy(dual))},
		{name: "NodePort with shared node port", svc: newService("s", ofType(corev1.ServiceTypeNodePort), withPolicy(prefer), withPorts(
			port("dns-tcp", 53, corev1.ProtocolTCP, 0), port("dns-udp", 53, corev1.ProtocolUDP, 0), port("http", 80, corev1.ProtocolTCP, 30080)))},
		{name: "LoadBalancer with health check", svc: newService("s", localTraffic)},
		{name: "headless", svc: newService("s", headless, selectorless)},
		{name: "ExternalName", svc: newService("s", externalName)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, defaultPorts, dualStack46...)
			// Another Service's allocations must survive.
			other := create(t, c, newService("other", ofType(corev1.ServiceTypeNodePort), withPolicy(dual)))
			svc := create(t, c, tt.svc.DeepCopy())
			if err := c.alloc.Release(ctx, svc); err != nil {
				t.Fatalf("Release: %v", err)
			}
			otherIPs := slices.Clone(other.Spec.ClusterIPs)
			slices.Sort(otherIPs)
			if got := c.heldIPs(t); !slices.Equal(got, otherIPs) {
				t.Errorf("IPs %v, want only the other Service's %v", got, otherIPs)
			}
			if got := c.heldPorts(t); !slices.Equal(got, nodePorts(other)) {
				t.Errorf("ports %v, want only the other Service's %v", got, nodePorts(other))
			}
			// Releasing again is harmless.
			if err := c.alloc.Release(ctx, svc); err != nil {
				t.Errorf("second Release: %v", err)
			}
		})
	}

	t.Run("an IP held by another Service is not released", func(t *testing.T) {
		c := newCluster(t, defaultPorts, cidr4)
		owner := create(t, c, newService("owner"))
		impostor := newService("impostor", withClusterIPs(owner.Spec.ClusterIP), withFamilies(v4), withPolicy(single))
		if err := c.alloc.Release(ctx, impostor); err != nil {
			t.Fatal(err)
		}
		if got := c.owner(t, owner.Spec.ClusterIP); got != "default/owner" {
			t.Errorf("IP %s now owned by %q", owner.Spec.ClusterIP, got)
		}
	})
}

// Creates racing through two apiservers never share an IP or a node port.
func TestConcurrentCreatesAcrossApiservers(t *testing.T) {
	ctx := context.Background()
	first := newCluster(t, defaultPorts, dualStack46...)
	apiservers := []*cluster{first, apiserver(t, first.prefix, defaultPorts, dualStack46...)}
	const n = 48
	svcs := make([]*corev1.Service, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc := newService(fmt.Sprintf("s%d", i), ofType(corev1.ServiceTypeNodePort), withPolicy(prefer), withPorts(
				port("http", 80, corev1.ProtocolTCP, 0), port("https", 443, corev1.ProtocolTCP, 0)))
			txn, err := apiservers[i%2].alloc.Create(ctx, svc, false)
			if err != nil {
				t.Errorf("%s: %v", svc.Name, err)
				return
			}
			txn.Commit(ctx)
			svcs[i] = svc
		}()
	}
	wg.Wait()
	ipOwner, portOwner := map[string]string{}, map[int]string{}
	var allIPs []string
	var allPorts []int
	for _, svc := range svcs {
		if svc == nil {
			continue
		}
		for _, ip := range svc.Spec.ClusterIPs {
			if prev, dup := ipOwner[ip]; dup {
				t.Errorf("%s given to %s and %s", ip, prev, svc.Name)
			}
			ipOwner[ip] = svc.Name
			allIPs = append(allIPs, ip)
			if got := first.owner(t, ip); got != "default/"+svc.Name {
				t.Errorf("IPAddress %s owned by %q, want %s", ip, got, svc.Name)
			}
		}
		for _, p := range nodePorts(svc) {
			if prev, dup := portOwner[p]; dup {
				t.Errorf("node port %d given to %s and %s", p, prev, svc.Name)
			}
			portOwner[p] = svc.Name
			allPorts = append(allPorts, p)
		}
	}
	slices.Sort(allIPs)
	slices.Sort(allPorts)
	if got := first.heldIPs(t); !slices.Equal(got, allIPs) {
		t.Errorf("%d IPs stored, %d handed out", len(got), len(allIPs))
	}
	if got := first.heldPorts(t); !slices.Equal(got, allPorts) {
		t.Errorf("%d ports stored, %d handed out", len(got), len(allPorts))
	}
	if len(allIPs) != 2*n || len(allPorts) != 2*n {
		t.Errorf("%d IPs and %d ports for %d dual-stack two-port Services", len(allIPs), len(allPorts), n)
	}
}
