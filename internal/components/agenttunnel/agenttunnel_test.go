package agenttunnel

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestHolds(t *testing.T) {
	node := &corev1.Node{
		Spec: corev1.NodeSpec{PodCIDRs: []string{"10.42.1.0/24", "fd00:42:1::/64"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "198.51.100.2"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
			{Type: corev1.NodeHostName, Address: "10.0.0.9"},
		}},
	}
	tests := []struct {
		ip   string
		want bool
	}{
		{"10.42.1.7", true},
		{"fd00:42:1::5", true},
		{"10.42.2.7", false},
		{"198.51.100.2", true},
		{"203.0.113.7", true},
		// A host name that happens to parse as an IP is not an address.
		{"10.0.0.9", false},
		{"198.51.100.3", false},
	}
	for _, tc := range tests {
		if got := holds(node, netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("holds(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
}
