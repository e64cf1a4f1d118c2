package simulatednodes

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Options)
		flag string // the error must name it; empty: valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"4096 nodes fill the default range", func(o *Options) { o.Count = 4096 }, ""},
		{"4097 nodes do not", func(o *Options) { o.Count = 4097 }, "--simulated-node-cidr"},
		{"negative count", func(o *Options) { o.Count = -1 }, "--simulated-nodes"},
		{"CIDR not a CIDR", func(o *Options) { o.PodCIDR = "10.0.0.0" }, "--simulated-node-cidr"},
		{"CIDR smaller than a node's", func(o *Options) { o.PodCIDR = "10.0.0.0/25" }, "--simulated-node-cidr"},
		{"IPv6 CIDR", func(o *Options) { o.PodCIDR = "fd00::/48" }, "--simulated-node-cidr"},
		{"one /24 for two nodes", func(o *Options) { o.PodCIDR, o.Count = "10.0.0.0/24", 2 }, "--simulated-node-cidr"},
		{"lease under a second", func(o *Options) { o.LeaseDuration = 500 * time.Millisecond }, "--simulated-node-lease-duration"},
		{"lease not whole seconds", func(o *Options) { o.LeaseDuration = 1500 * time.Millisecond }, "--simulated-node-lease-duration"},
		{"negative startup delay", func(o *Options) { o.PodStartupDelay = -time.Second }, "--simulated-pod-startup-delay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			tt.set(o)
			errs := o.Validate()
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
	p := netip.MustParsePrefix(DefaultPodCIDR)
	for _, tt := range []struct {
		i        int
		cidr, ip string
	}{
		{0, "10.128.0.0/24", "198.18.0.1"},
		{1, "10.128.1.0/24", "198.18.0.2"},
		{256, "10.129.0.0/24", "198.18.1.1"},
		{4095, "10.143.255.0/24", "198.18.16.0"},
	} {
		node := newNode(tt.i, p, true)
		if node.Spec.PodCIDR != tt.cidr {
			t.Errorf("node %d: pod CIDR %s, want %s", tt.i, node.Spec.PodCIDR, tt.cidr)
		}
		if got := node.Status.Addresses[0].Address; got != tt.ip {
			t.Errorf("node %d: InternalIP %s, want %s", tt.i, got, tt.ip)
		}
		if !netip.MustParsePrefix("198.18.0.0/15").Contains(netip.MustParseAddr(node.Status.Addresses[0].Address)) {
			t.Errorf("node %d: InternalIP %s outside 198.18.0.0/15", tt.i, node.Status.Addresses[0].Address)
		}
	}
	if n := newNode(0, p, false); n.Spec.PodCIDR != "" || len(n.Spec.PodCIDRs) != 0 {
		t.Errorf("with the controller manager allocating, node 0 got pod CIDRs %v", n.Spec.PodCIDRs)
	}
}
