package reconcilers_test

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
)

// The cases of kube-apiserver's TestMasterCountEndpointReconciler, against
// a real server, plus trimming with several counts and starting sets.
func TestMasterCountReconcileEndpoints(t *testing.T) {
	threePorts := []corev1.EndpointPort{
		{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP},
		{Name: "bar", Port: 1000, Protocol: corev1.ProtocolTCP},
		{Name: "baz", Port: 1010, Protocol: corev1.ProtocolTCP},
	}
	twoPorts := threePorts[:2]
	tests := []struct {
		name           string
		own            string
		count          int
		initial        *corev1.Endpoints // nil: none
		ports          []corev1.EndpointPort
		reconcilePorts bool
		wantIPs        []string
		wantPorts      []corev1.EndpointPort // default: ports
		wantUnchanged  bool                  // the Endpoints keep their resourceVersion
	}{
		{name: "no endpoints", own: ipA, count: 1, reconcilePorts: true, wantIPs: []string{ipA}},
		{name: "no endpoints, reconcilePorts=false", own: ipA, count: 1, wantIPs: []string{ipA}},
		{
			name: "no endpoints, SCTP port", own: ipA, count: 1, reconcilePorts: true,
			ports:   []corev1.EndpointPort{{Name: "boo", Port: 7777, Protocol: corev1.ProtocolSCTP}},
			wantIPs: []string{ipA},
		},
		{
			name: "own IP present", own: ipA, count: 1, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA}, wantUnchanged: true,
		},
		{
			name: "own IP present, fewer than count", own: ipC, count: 4, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB, ipC)),
			wantIPs: []string{ipB, ipC}, wantUnchanged: true,
		},
		{
			name: "own IP missing, fewer than count", own: ipC, count: 4, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)),
			wantIPs: []string{ipB, ipC},
		},
		{
			name: "wrong IP", own: ipA, count: 1, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)),
			wantIPs: []string{ipA},
		},
		{
			name: "wrong port", own: ipA, count: 1, reconcilePorts: true,
			initial: endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "wrong protocol", own: ipA, count: 1, reconcilePorts: true,
			initial: endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolUDP}}, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "wrong port name", own: ipA, count: 1, reconcilePorts: true,
			initial: endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "foo", Port: 6443, Protocol: corev1.ProtocolTCP}}, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "extra service ports satisfy", own: ipA, count: 1, reconcilePorts: true, ports: threePorts,
			initial: endpoints(skipMirror, subset(threePorts, ipA)),
			wantIPs: []string{ipA}, wantUnchanged: true,
		},
		{
			name: "extra service ports, one missing", own: ipA, count: 1, reconcilePorts: true, ports: twoPorts,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "wrong port kept when reconcilePorts=false", own: ipA, count: 1,
			initial:   endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, ipA)),
			wantIPs:   []string{ipA},
			wantPorts: []corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, wantUnchanged: true,
		},
		{
			name: "missing port not added when reconcilePorts=false", own: ipA, count: 1, ports: twoPorts,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA}, wantPorts: httpsPorts, wantUnchanged: true,
		},
		{
			name: "wrong IP and ports, reconcilePorts=false: IP fixed, ports kept", own: ipA, count: 1, ports: twoPorts,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)),
			wantIPs: []string{ipA}, wantPorts: httpsPorts,
		},
		{
			name: "missing skip-mirror label added", own: ipA, count: 1, reconcilePorts: true,
			initial: endpoints(nil, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "several subsets rewritten to one", own: ipA, count: 3, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB), subset([]corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, ipA, ipC)),
			wantIPs: []string{ipA},
		},
		// Trimming: drop the addresses sorting right after our own,
		// wrapping around (.1 < .10 < .2 < .3 < .4).
		{
			name: "own present, too many, count 1", own: ipA, count: 1, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB)),
			wantIPs: []string{ipA},
		},
		{
			name: "own present, too many, count 2", own: ipC, count: 2, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipC, ipD)),
			wantIPs: []string{ipB, ipC},
		},
		{
			name: "own present, too many + extra masters (count 4)", own: ipA, count: 4, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipC, ipD, ipE)),
			wantIPs: []string{ipA, ipC, ipD, ipE},
		},
		{
			name: "own present last, too many + extra masters: wraps to the first (count 4)", own: ipE, count: 4, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipC, ipD, ipE)),
			wantIPs: []string{ipB, ipC, ipD, ipE},
		},
		{
			name: "own missing, count 1, wraps", own: ipD, count: 1, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipC)),
			wantIPs: []string{ipD},
		},
		{
			name: "own missing, count 2, wraps", own: ipD, count: 2, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipC)),
			wantIPs: []string{ipC, ipD},
		},
		{
			name: "own missing, count 2, no wrap", own: ipB, count: 2, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipC, ipD)),
			wantIPs: []string{ipA, ipB},
		},
		{
			name: "own missing, count 3", own: ipC, count: 3, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipD)),
			wantIPs: []string{ipA, ipB, ipC},
		},
		{
			name: "own missing, count 3, room left", own: ipA, count: 3, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB, ipC)),
			wantIPs: []string{ipA, ipB, ipC},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			before := reset(t, tc.initial)
			ports := tc.ports
			if ports == nil {
				ports = httpsPorts
			}
			wantPorts := tc.wantPorts
			if wantPorts == nil {
				wantPorts = ports
			}
			r := reconcilers.NewMasterCount(client, tc.count)
			defer r.Destroy()
			if err := r.ReconcileEndpoints(ctx, addr(t, tc.own), ports, tc.reconcilePorts); err != nil {
				t.Fatalf("ReconcileEndpoints: %v", err)
			}
			checkPublished(t, tc.wantIPs, wantPorts)
			after := getEndpoints(t)
			if tc.wantUnchanged && after.ResourceVersion != before.ResourceVersion {
				t.Errorf("Endpoints rewritten (resourceVersion %s -> %s), want untouched", before.ResourceVersion, after.ResourceVersion)
			}
			checkSecondPassIsNoOp(ctx, t, r, addr(t, tc.own), ports, tc.reconcilePorts, after)
		})
	}
}

func TestMasterCountIPv6(t *testing.T) {
	ctx := ctxFor(t)
	// An IPv4 slice left over: addressType is immutable, so it must be
	// replaced.
	reset(t, endpoints(skipMirror, subset(httpsPorts, ipA)))
	r := reconcilers.NewMasterCount(client, 1)
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, []string{ipA}, httpsPorts)
	if err := r.ReconcileEndpoints(ctx, addr(t, ip6), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, []string{ip6}, httpsPorts)
	if s := getSlice(t); s.AddressType != discoveryv1.AddressTypeIPv6 {
		t.Errorf("addressType = %s, want IPv6", s.AddressType)
	}
}

// kube-apiserver's "existing endpoints satisfy, endpointslice is wrong".
func TestMasterCountFixesSlice(t *testing.T) {
	ctx := ctxFor(t)
	reset(t, endpoints(skipMirror, subset(httpsPorts, ipA)))
	r := reconcilers.NewMasterCount(client, 1)
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	s := getSlice(t)
	s.Endpoints[0].Addresses = []string{ipB}
	s.Labels = map[string]string{"other": "x"}
	if _, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, []string{ipA}, httpsPorts)
}

func TestMasterCountRemoveEndpoints(t *testing.T) {
	otherPorts := []corev1.EndpointPort{{Name: "https", Port: 9443, Protocol: corev1.ProtocolTCP}}
	tests := []struct {
		name       string
		initial    *corev1.Endpoints
		own        string
		wantListed bool
		wantIPs    []string // nil with wantNone: no Endpoints at all
		wantNone   bool
		wantPorts  []corev1.EndpointPort
	}{
		{name: "no endpoints", own: ipA, wantNone: true},
		{
			name: "listed with others", own: ipA, wantListed: true,
			initial: endpoints(skipMirror, subset(otherPorts, ipA, ipB, ipC)),
			wantIPs: []string{ipB, ipC}, wantPorts: otherPorts,
		},
		{
			name: "not listed: untouched", own: ipA,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)),
		},
		{
			name: "the last one", own: ipA, wantListed: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{},
		},
		{
			// kube-apiserver removes the address from the first subset
			// whatever the number of subsets.
			name: "listed in the first of several subsets", own: ipA, wantListed: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB), subset(otherPorts, ipC)),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			before := reset(t, tc.initial)
			r := reconcilers.NewMasterCount(client, 3)
			listed, err := r.RemoveEndpoints(ctx, addr(t, tc.own), httpsPorts)
			if err != nil {
				t.Fatalf("RemoveEndpoints: %v", err)
			}
			if listed != tc.wantListed {
				t.Errorf("RemoveEndpoints reported listed=%v, want %v", listed, tc.wantListed)
			}
			e := getEndpoints(t)
			if !tc.wantListed && before != nil && e.ResourceVersion != before.ResourceVersion {
				t.Errorf("RemoveEndpoints rewrote the Endpoints: %+v", e.Subsets)
			}
			switch {
			case tc.wantNone:
				if e != nil {
					t.Errorf("RemoveEndpoints created Endpoints: %+v", e)
				}
			case tc.wantIPs != nil:
				checkPublished(t, tc.wantIPs, tc.wantPorts)
			}
			if e != nil {
				for _, s := range e.Subsets {
					for _, a := range s.Addresses {
						if a.IP == tc.own {
							t.Errorf("%s still listed after RemoveEndpoints: %+v", tc.own, e.Subsets)
						}
					}
				}
			}
		})
	}
}

func TestMasterCountStopReconciling(t *testing.T) {
	ctx := ctxFor(t)
	before := reset(t, endpoints(skipMirror, subset(httpsPorts, ipB)))
	r := reconcilers.NewMasterCount(client, 2)
	if r.Changed() != nil {
		t.Errorf("master-count has a Changed channel; want nil")
	}
	r.StopReconciling()
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	if e := getEndpoints(t); e.ResourceVersion != before.ResourceVersion {
		t.Errorf("ReconcileEndpoints after StopReconciling wrote %+v", e.Subsets)
	}
	// Removal still works after stopping: that is how a stopping apiserver
	// leaves.
	reset(t, endpoints(skipMirror, subset(httpsPorts, ipA, ipB)))
	if listed, err := r.RemoveEndpoints(ctx, addr(t, ipA), httpsPorts); err != nil || !listed {
		t.Fatalf("RemoveEndpoints after StopReconciling = %v, %v; want true, nil", listed, err)
	}
	checkPublished(t, []string{ipB}, httpsPorts)
}

// The trimming rule alone: while there are more than count addresses, drop
// the one sorting (as a string) right after our own, wrapping around.
func TestTrim(t *testing.T) {
	tests := []struct {
		name  string
		ips   []string
		own   string
		count int
		want  []string
	}{
		{name: "no trimming needed", ips: []string{ipA, ipB}, own: ipA, count: 2, want: []string{ipA, ipB}},
		{name: "count 1, own first", ips: []string{ipA, ipB, ipC}, own: ipA, count: 1, want: []string{ipA}},
		{name: "count 1, own last", ips: []string{ipA, ipB, ipC, ipD}, own: ipD, count: 1, want: []string{ipD}},
		{name: "count 1, own middle", ips: []string{ipA, ipB, ipC, ipD}, own: ipB, count: 1, want: []string{ipB}},
		{name: "count 2, own first", ips: []string{ipA, ipB, ipC, ipD}, own: ipA, count: 2, want: []string{ipA, ipD}},
		{name: "count 2, own middle, no wrap", ips: []string{ipA, ipB, ipC, ipD}, own: ipB, count: 2, want: []string{ipA, ipB}},
		{name: "count 2, own middle, wraps", ips: []string{ipA, ipB, ipC, ipD}, own: ipC, count: 2, want: []string{ipB, ipC}},
		{name: "count 2, own last, wraps twice", ips: []string{ipA, ipB, ipC, ipD}, own: ipD, count: 2, want: []string{ipC, ipD}},
		{name: "count 3, own last", ips: []string{ipA, ipB, ipC, ipD, ipE}, own: ipE, count: 3, want: []string{ipC, ipD, ipE}},
		{name: "count 3, own second", ips: []string{ipA, ipB, ipC, ipD, ipE}, own: ipB, count: 3, want: []string{ipA, ipB, ipE}},
		{name: "count 4 (upstream's extra masters)", ips: []string{ipA, ipB, ipC, ipD, ipE}, own: ipA, count: 4, want: []string{ipA, ipC, ipD, ipE}},
		{name: "count 4, delete first (upstream's)", ips: []string{ipA, ipB, ipC, ipD, ipE}, own: ipE, count: 4, want: []string{ipB, ipC, ipD, ipE}},
		{name: "unsorted input", ips: []string{ipD, ipA, ipC, ipB}, own: ipC, count: 3, want: []string{ipA, ipB, ipC}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in []netip.Addr
			for _, s := range tc.ips {
				in = append(in, addr(t, s))
			}
			orig := slices.Clone(in)
			var got []string
			for _, ip := range reconcilers.Trim(in, addr(t, tc.own), tc.count) {
				got = append(got, ip.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Trim(%v, %s, %d) = %v, want %v", tc.ips, tc.own, tc.count, got, tc.want)
			}
			if !slices.Equal(in, orig) {
				t.Errorf("Trim modified its input: %v", in)
			}
		})
	}
}
