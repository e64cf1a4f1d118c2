package simulatednodes

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ipam := &NodeIPAM{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, MaskSizes: []int{24}}
	tests := []struct {
		name string
		set  func(*Options)
		ipam *NodeIPAM
		flag string // the error must name it; empty: valid
	}{
		{"defaults", func(*Options) {}, nil, ""},
		{"16384 nodes fill the default range", func(o *Options) { o.Count = 16384 }, nil, ""},
		{"16385 nodes do not", func(o *Options) { o.Count = 16385 }, nil, "--simulated-node-cidr"},
		{"negative count", func(o *Options) { o.Count = -1 }, nil, "--simulated-nodes"},
		{"CIDR not a CIDR", func(o *Options) { o.PodCIDR = "10.0.0.0" }, nil, "--simulated-node-cidr"},
		{"CIDR smaller than a node's", func(o *Options) { o.PodCIDR = "10.0.0.0/25" }, nil, "--simulated-node-cidr"},
		{"IPv6 CIDR", func(o *Options) { o.PodCIDR = "fd00::/48" }, nil, "--simulated-node-cidr"},
		{"one /24 for two nodes", func(o *Options) { o.PodCIDR, o.Count = "10.0.0.0/24", 2 }, nil, "--simulated-node-cidr"},
		{"lease under a second", func(o *Options) { o.LeaseDuration = 500 * time.Millisecond }, nil, "--simulated-node-lease-duration"},
		{"lease not whole seconds", func(o *Options) { o.LeaseDuration = 1500 * time.Millisecond }, nil, "--simulated-node-lease-duration"},
		{"negative startup delay", func(o *Options) { o.PodStartupDelay = -time.Second }, nil, "--simulated-pod-startup-delay"},
		{"with node IPAM, more nodes than the default range holds", func(o *Options) { o.Count = 20000 }, ipam, ""},
		{"with node IPAM, CIDR still not a CIDR", func(o *Options) { o.PodCIDR = "10.0.0.0" }, ipam, "--simulated-node-cidr"},
	}
	// As much memory as the counts need: TestValidateMemory checks that.
	defer func(f func() uint64) { machineMemory = f }(machineMemory)
	machineMemory = func() uint64 { return 1 << 40 }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			tt.set(o)
			errs := o.Validate(tt.ipam)
			if tt.flag == "" {
				if len(errs) > 0 {
					t.Fatalf("Validate() = %v, want no error", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.flag) {
				t.Fatalf("Validate() = %v, want one error naming %s", errs, tt.flag)
			}
		})
	}
}

func TestNodeAddresses(t *testing.T) {
	plan, err := NewOptions().plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		i        int
		cidr, ip string
	}{
		{0, "10.128.0.0/24", "198.18.0.1"},
		{1, "10.128.1.0/24", "198.18.0.2"},
		{256, "10.129.0.0/24", "198.18.1.1"},
		{4095, "10.143.255.0/24", "198.18.16.0"},
	} {
		node := newNode(tt.i, plan.node(tt.i))
		if node.Spec.PodCIDR != tt.cidr || !slices.Equal(node.Spec.PodCIDRs, []string{tt.cidr}) {
			t.Errorf("node %d: pod CIDRs %s %v, want %s", tt.i, node.Spec.PodCIDR, node.Spec.PodCIDRs, tt.cidr)
		}
		if got := node.Status.Addresses[0].Address; got != tt.ip {
			t.Errorf("node %d: InternalIP %s, want %s", tt.i, got, tt.ip)
		}
		if !netip.MustParsePrefix("198.18.0.0/15").Contains(netip.MustParseAddr(node.Status.Addresses[0].Address)) {
			t.Errorf("node %d: InternalIP %s outside 198.18.0.0/15", tt.i, node.Status.Addresses[0].Address)
		}
	}
}

// TestNodeIPAMCIDRs: under kube-controller-manager's node IPAM, node i
// takes the i-th node CIDR from the end of each of its ranges, of the
// range's node prefix length, whose start the allocator hands out.
func TestNodeIPAMCIDRs(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ranges []string
		sizes  []int
		i      int
		want   []string
	}{
		{"first node", []string{"10.42.0.0/16"}, []int{24}, 0, []string{"10.42.255.0/24"}},
		{"second node", []string{"10.42.0.0/16"}, []int{24}, 1, []string{"10.42.254.0/24"}},
		{"last node of the range", []string{"10.42.0.0/16"}, []int{24}, 255, []string{"10.42.0.0/24"}},
		{"smaller node CIDRs", []string{"10.42.0.0/16"}, []int{26}, 1, []string{"10.42.255.128/26"}},
		{"dual-stack", []string{"10.42.0.0/16", "fd00:42::/56"}, []int{24, 64}, 2, []string{"10.42.253.0/24", "fd00:42:0:fd::/64"}},
		{"IPv6 first", []string{"fd00:42::/48", "10.42.0.0/16"}, []int{64, 24}, 0, []string{"fd00:42:0:ffff::/64", "10.42.255.0/24"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ipam := &NodeIPAM{MaskSizes: tt.sizes}
			for _, r := range tt.ranges {
				ipam.ClusterCIDRs = append(ipam.ClusterCIDRs, netip.MustParsePrefix(r))
			}
			plan, err := NewOptions().plan(ipam)
			if err != nil {
				t.Fatal(err)
			}
			node := newNode(tt.i, plan.node(tt.i))
			if !slices.Equal(node.Spec.PodCIDRs, tt.want) || node.Spec.PodCIDR != tt.want[0] {
				t.Errorf("node %d: pod CIDRs %s %v, want %v", tt.i, node.Spec.PodCIDR, node.Spec.PodCIDRs, tt.want)
			}
		})
	}
}

func TestValidateMemory(t *testing.T) {
	defer func(f func() uint64) { machineMemory = f }(machineMemory)
	for _, tt := range []struct {
		name   string
		memory uint64
		count  int
		want   string // in the error; empty: valid
	}{
		{"5,000 nodes on 24 GiB", 24 << 30, 5000, ""},
		{"as many as 24 GiB holds", 24 << 30, 49152, ""},
		{"one more", 24 << 30, 49153, "at most 49152"},
		{"on 1 GiB", 1 << 30, 4096, "--simulated-nodes 4096 would take about 2.0 GiB"},
		{"memory unknown", 0, 1 << 20, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			machineMemory = func() uint64 { return tt.memory }
			o := NewOptions()
			o.Count = tt.count
			err := o.validateMemory()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("validateMemory() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("validateMemory() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
