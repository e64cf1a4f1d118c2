package hostnode

import (
	"net/netip"
	"strings"
	"testing"
)

// TestCheckFamilies: a node's addresses must be of the families of the
// cluster's pod ranges, which an agent learns at its join.
func TestCheckFamilies(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")
	for _, tc := range []struct {
		name    string
		ips     []netip.Addr
		cluster string
		want    string // in the error; "": none
	}{
		{"IPv4 node, IPv4 cluster", []netip.Addr{v4}, "10.42.0.0/16", ""},
		{"dual-stack node, dual-stack cluster", []netip.Addr{v4, v6}, "10.42.0.0/16,2001:db8:42::/56", ""},
		{"IPv4 node, dual-stack cluster", []netip.Addr{v4}, "10.42.0.0/16,2001:db8:42::/56", ""},
		{"no address given", nil, "2001:db8:42::/56", ""},
		{"cluster ranges unknown", []netip.Addr{v6}, "", ""},
		{"IPv6 node, IPv4 cluster", []netip.Addr{v6}, "10.42.0.0/16", "--node-ip 2001:db8::7: the cluster has no IPv6 ranges"},
		{"dual-stack node, IPv6 cluster", []netip.Addr{v4, v6}, "2001:db8:42::/56", "--node-ip 198.51.100.7: the cluster has no IPv4 ranges"},
	} {
		err := CheckFamilies("--node-ip", tc.ips, tc.cluster)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// An agent's external addresses are checked the same way, naming
	// their flag.
	o := &Options{nodeIPs: []netip.Addr{v4}, ExternalIPs: []netip.Addr{v4, v6}}
	if err := o.checkFamilies("10.42.0.0/16"); err == nil || !strings.Contains(err.Error(), "--node-external-ip 2001:db8::7: the cluster has no IPv6 ranges") {
		t.Errorf("external IPv6 address on an IPv4 cluster: %v", err)
	}
}

// TestNodeIPArgs: a node with external addresses runs its kubelet with
// an external cloud provider and always with its --node-ip, which the
// cloud node controller keeps as its InternalIPs.
func TestNodeIPArgs(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")
	external := []netip.Addr{netip.MustParseAddr("203.0.113.7")}
	for _, tc := range []struct {
		name string
		o    Options
		want string // the flags, space-separated; a trailing "*": any value
	}{
		{"neither", Options{}, ""},
		{"node IPs", Options{NodeIPs: []netip.Addr{v4, v6}}, "--node-ip=198.51.100.7,2001:db8::7"},
		{"external", Options{NodeIPs: []netip.Addr{v4}, ExternalIPs: external}, "--cloud-provider=external --node-ip=198.51.100.7"},
		{"external, the node's address found", Options{ExternalIPs: external}, "--cloud-provider=external --node-ip=*"},
	} {
		args, err := tc.o.nodeIPArgs()
		got := strings.Join(args, " ")
		want, anyValue := strings.CutSuffix(tc.want, "*")
		if err != nil || (anyValue && (!strings.HasPrefix(got, want) || len(got) == len(want))) || (!anyValue && got != want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
