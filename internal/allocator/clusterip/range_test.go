package clusterip

import (
	"net/netip"
	"testing"

	"github.com/kubeboot/kubeboot/internal/network"
)

// staticBand is kube-apiserver's KEP-3070 split, written out again here so
// that the test does not trust the code under test: min(max(16,
// size/16), 256) addresses of a CIDR of size addresses, none when size <= 16.
func staticBand(size int) int {
	if size <= 16 {
		return 0
	}
	return min(max(16, size/16), 256)
}

func TestNewRange(t *testing.T) {
	tests := []struct {
		name        string
		prefix      string
		first, last string // usable addresses
		size        int
		reserved    int
	}{
		{name: "ipv4 /29", prefix: "10.0.0.0/29", first: "10.0.0.1", last: "10.0.0.6", size: 6, reserved: 0},
		{name: "ipv4 /28 is not split", prefix: "10.0.0.0/28", first: "10.0.0.1", last: "10.0.0.14", size: 14, reserved: 0},
		{name: "ipv4 /27", prefix: "10.0.0.0/27", first: "10.0.0.1", last: "10.0.0.30", size: 30, reserved: 16},
		{name: "ipv4 /24", prefix: "10.0.0.0/24", first: "10.0.0.1", last: "10.0.0.254", size: 254, reserved: 16},
		{name: "ipv4 /23", prefix: "10.0.0.0/23", first: "10.0.0.1", last: "10.0.1.254", size: 510, reserved: 32},
		{name: "ipv4 /21", prefix: "10.0.0.0/21", first: "10.0.0.1", last: "10.0.7.254", size: 2046, reserved: 128},
		{name: "ipv4 /20", prefix: "10.0.0.0/20", first: "10.0.0.1", last: "10.0.15.254", size: 4094, reserved: 256},
		{name: "ipv4 /16", prefix: "10.96.0.0/16", first: "10.96.0.1", last: "10.96.255.254", size: 65534, reserved: 256},
		{name: "ipv4 /12", prefix: "10.96.0.0/12", first: "10.96.0.1", last: "10.111.255.254", size: 1<<20 - 2, reserved: 256},
		{name: "ipv4 unmasked prefix", prefix: "192.168.7.9/24", first: "192.168.7.1", last: "192.168.7.254", size: 254, reserved: 16},
		{name: "ipv6 /125", prefix: "fd00::/125", first: "fd00::1", last: "fd00::7", size: 7, reserved: 0},
		{name: "ipv6 /124 is not split", prefix: "fd00::/124", first: "fd00::1", last: "fd00::f", size: 15, reserved: 0},
		{name: "ipv6 /120", prefix: "fd00::/120", first: "fd00::1", last: "fd00::ff", size: 255, reserved: 16},
		{name: "ipv6 /118", prefix: "fd00:10::/118", first: "fd00:10::1", last: "fd00:10::3ff", size: 1023, reserved: 64},
		{name: "ipv6 /112", prefix: "fd00::/112", first: "fd00::1", last: "fd00::ffff", size: 65535, reserved: 256},
		{name: "ipv6 /108", prefix: "fd00:1234::/108", first: "fd00:1234::1", last: "fd00:1234::f:ffff", size: 1<<20 - 1, reserved: 256},
		{name: "ipv6 /108 with high bits set", prefix: "2001:db8:ffff:ffff:ffff:ffff:fff0:0/108", first: "2001:db8:ffff:ffff:ffff:ffff:fff0:1", last: "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", size: 1<<20 - 1, reserved: 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := netip.MustParsePrefix(tt.prefix)
			r := NewRange(prefix)
			first, last := netip.MustParseAddr(tt.first), netip.MustParseAddr(tt.last)
			if got := r.Prefix(); got != prefix.Masked() {
				t.Errorf("Prefix() = %s, want %s", got, prefix.Masked())
			}
			if got := r.Size(); got != tt.size {
				t.Errorf("Size() = %d, want %d", got, tt.size)
			}
			if r.reserved != tt.reserved {
				t.Errorf("reserved = %d, want %d", r.reserved, tt.reserved)
			}
			cidrSize := 1 << (prefix.Addr().BitLen() - prefix.Bits())
			if want := staticBand(cidrSize); r.reserved != want {
				t.Errorf("reserved = %d, want min(max(16, %d/16), 256) = %d", r.reserved, cidrSize, want)
			}
			if got := r.Addr(r.first); got != first {
				t.Errorf("first usable address = %s, want %s", got, first)
			}
			if got := r.Addr(r.last); got != last {
				t.Errorf("last usable address = %s, want %s", got, last)
			}
			if got := r.last - r.first + 1; got != tt.size {
				t.Errorf("last-first+1 = %d, want the size %d", got, tt.size)
			}

			base := prefix.Masked().Addr()
			lastInCIDR := r.Addr(cidrSize - 1)
			after := lastInCIDR.Next()
			contains := []struct {
				ip                  netip.Addr
				inNetwork, contains bool
			}{
				{ip: base, inNetwork: true, contains: false},
				{ip: first, inNetwork: true, contains: true},
				{ip: last, inNetwork: true, contains: true},
				// The IPv4 broadcast address is not usable; IPv6 has none.
				{ip: lastInCIDR, inNetwork: true, contains: prefix.Addr().Is6()},
				{ip: base.Prev(), inNetwork: false, contains: false},
				{ip: after, inNetwork: false, contains: false},
			}
			for _, c := range contains {
				if !c.ip.IsValid() {
					continue // past the end of the address space
				}
				if got := r.InNetwork(c.ip); got != c.inNetwork {
					t.Errorf("InNetwork(%s) = %v, want %v", c.ip, got, c.inNetwork)
				}
				if got := r.Contains(c.ip); got != c.contains {
					t.Errorf("Contains(%s) = %v, want %v", c.ip, got, c.contains)
				}
			}

			// The kubernetes Service takes the first address; it lies in
			// the band kept for requested IPs whenever there is one.
			kubernetes := network.ServiceCIDRs{Primary: prefix.Masked()}.KubernetesServiceIP()
			if kubernetes != first {
				t.Errorf("KubernetesServiceIP = %s, want the first usable address %s", kubernetes, first)
			}
			if off, ok := r.offset(kubernetes); !ok || off != r.first {
				t.Errorf("offset(%s) = %d, %v; want the first usable offset %d", kubernetes, off, ok, r.first)
			}
		})
	}
}

func TestRangeAddrOffsetRoundTrip(t *testing.T) {
	tests := []struct {
		prefix string
		// offset -> address, beyond first/last and the band edges that
		// every case checks.
		known map[int]string
	}{
		{prefix: "10.0.0.0/24", known: map[int]string{1: "10.0.0.1", 16: "10.0.0.16", 17: "10.0.0.17", 254: "10.0.0.254"}},
		{prefix: "10.96.0.0/12", known: map[int]string{256: "10.96.1.0", 257: "10.96.1.1", 65536: "10.97.0.0", 1<<20 - 2: "10.111.255.254"}},
		{prefix: "172.31.255.0/24", known: map[int]string{255: "172.31.255.255"}},
		{prefix: "fd00::/108", known: map[int]string{256: "fd00::100", 257: "fd00::101", 65536: "fd00::1:0", 1<<20 - 1: "fd00::f:ffff"}},
		{prefix: "fd00:0:0:ffff:ffff:ffff:fff0:0/108", known: map[int]string{1: "fd00:0:0:ffff:ffff:ffff:fff0:1", 1<<20 - 1: "fd00:0:0:ffff:ffff:ffff:ffff:ffff"}},
		{prefix: "2001:db8::/120", known: map[int]string{255: "2001:db8::ff"}},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			r := NewRange(netip.MustParsePrefix(tt.prefix))
			offsets := []int{r.first, r.first + 1, r.first + r.reserved - 1, r.first + r.reserved, (r.first + r.last) / 2, r.last - 1, r.last}
			for off, s := range tt.known {
				if got, want := r.Addr(off), netip.MustParseAddr(s); got != want {
					t.Errorf("Addr(%d) = %s, want %s", off, got, want)
				}
				offsets = append(offsets, off)
			}
			for _, off := range offsets {
				ip := r.Addr(off)
				if ip.Is4() != r.Prefix().Addr().Is4() {
					t.Errorf("Addr(%d) = %s is not of the range's family", off, ip)
				}
				if !r.InNetwork(ip) {
					t.Errorf("Addr(%d) = %s is outside %s", off, ip, r.Prefix())
				}
				got, ok := r.offset(ip)
				if !ok || got != off {
					t.Errorf("offset(Addr(%d) = %s) = %d, %v", off, ip, got, ok)
				}
			}
			outside := r.Addr(0).Prev()
			if _, ok := r.offset(outside); ok {
				t.Errorf("offset(%s) reported an address outside %s", outside, r.Prefix())
			}
		})
	}
}

// Every address of a small range, both ways.
func TestRangeSmallRangesExhaustive(t *testing.T) {
	for _, p := range []string{"10.0.0.0/29", "10.0.0.0/28", "10.0.0.0/27", "fd00::/125", "fd00::/124", "fd00::/122"} {
		prefix := netip.MustParsePrefix(p)
		r := NewRange(prefix)
		var usable []netip.Addr
		for ip := prefix.Addr(); prefix.Contains(ip); ip = ip.Next() {
			if r.Contains(ip) {
				usable = append(usable, ip)
			}
		}
		if len(usable) != r.Size() {
			t.Errorf("%s: %d addresses are Contained, Size() = %d", p, len(usable), r.Size())
		}
		for i, ip := range usable {
			if got := r.Addr(r.first + i); got != ip {
				t.Errorf("%s: Addr(%d) = %s, want %s", p, r.first+i, got, ip)
			}
		}
	}
}
