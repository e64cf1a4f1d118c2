package printers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestEndpointsCell(t *testing.T) {
	addrs := func(ips ...string) []corev1.EndpointAddress {
		out := make([]corev1.EndpointAddress, 0, len(ips))
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	ports := func(nums ...int32) []corev1.EndpointPort {
		out := make([]corev1.EndpointPort, 0, len(nums))
		for _, n := range nums {
			out = append(out, corev1.EndpointPort{Port: n})
		}
		return out
	}
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{{
		name: "no subsets",
		want: "<none>",
	}, {
		name:    "one address",
		subsets: []corev1.EndpointSubset{{Addresses: addrs("198.51.100.20"), Ports: ports(8080)}},
		want:    "198.51.100.20:8080",
	}, {
		name:    "exactly three",
		subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3"), Ports: ports(80)}},
		want:    "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80",
	}, {
		name:    "truncated after three",
		subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"), Ports: ports(80)}},
		want:    "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more...",
	}, {
		name:    "each port pairs with each address, ports outermost",
		subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: ports(80, 443)}},
		want:    "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...",
	}, {
		name: "across subsets",
		subsets: []corev1.EndpointSubset{
			{Addresses: addrs("10.0.0.1"), Ports: ports(80)},
			{Addresses: addrs("10.0.1.1", "10.0.1.2", "10.0.1.3"), Ports: ports(81)},
		},
		want: "10.0.0.1:80,10.0.1.1:81,10.0.1.2:81 + 1 more...",
	}, {
		name:    "headless subset without ports prints bare IPs",
		subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")}},
		want:    "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...",
	}, {
		name:    "IPv6 addresses are bracketed",
		subsets: []corev1.EndpointSubset{{Addresses: addrs("fd00::1"), Ports: ports(80)}},
		want:    "[fd00::1]:80",
	}, {
		name: "only not-ready addresses print an empty cell",
		subsets: []corev1.EndpointSubset{{
			NotReadyAddresses: addrs("10.0.0.1"), Ports: ports(80),
		}},
		want: "",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := webEndpoints(2 * s)
			ep.Subsets = tc.subsets
			got := cells(t, Endpoints(), ep)
			if got[0] != "web" || got[1] != tc.want || got[2] != "2s" {
				t.Errorf("cells %q, want [web %q 2s]", got, tc.want)
			}
		})
	}
}
