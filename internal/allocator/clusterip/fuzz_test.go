package clusterip

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// FuzzClusterIPRange checks Range's arithmetic on random prefixes of the
// sizes --service-cluster-ip-range accepts (IPv4 /12-/29, IPv6
// /108-/125), anywhere in the address space, against netip's own
// arithmetic: offsets and addresses map both ways, the network (and IPv4
// broadcast) address is never usable, and the static band follows the
// formula.
func FuzzClusterIPRange(f *testing.F) {
	f.Add(false, uint8(12), uint64(0), uint64(0x0a600000), uint32(1))          // 10.96.0.0/12
	f.Add(false, uint8(16), uint64(0), uint64(0xffffff00), uint32(0xffffffff)) // top of the IPv4 space
	f.Add(true, uint8(0), uint64(0xfd00000000000000), uint64(0), uint32(17))   // fd00::/108
	f.Add(true, uint8(17), ^uint64(0), ^uint64(0), uint32(3))                  // last IPv6 /125
	f.Fuzz(func(t *testing.T, v6 bool, bits uint8, hi, lo uint64, n uint32) {
		var addr netip.Addr
		var prefixLen int
		if v6 {
			var b [16]byte
			binary.BigEndian.PutUint64(b[:8], hi)
			binary.BigEndian.PutUint64(b[8:], lo)
			addr = netip.AddrFrom16(b)
			prefixLen = 108 + int(bits%18)
		} else {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(lo))
			addr = netip.AddrFrom4(b)
			prefixLen = 12 + int(bits%18)
		}
		prefix := netip.PrefixFrom(addr, prefixLen).Masked()
		r := NewRange(prefix)
		hostBits := addr.BitLen() - prefixLen
		cidrSize := 1 << hostBits
		wantSize := cidrSize - 1
		if !v6 {
			wantSize--
		}
		if r.Size() != wantSize {
			t.Fatalf("%s: Size() = %d, want %d", prefix, r.Size(), wantSize)
		}
		if r.reserved != staticBand(cidrSize) {
			t.Fatalf("%s: reserved = %d, want %d", prefix, r.reserved, staticBand(cidrSize))
		}
		if r.Addr(0) != prefix.Addr() || r.Contains(prefix.Addr()) {
			t.Fatalf("%s: the network address %s is usable or misplaced (Addr(0) = %s)", prefix, prefix.Addr(), r.Addr(0))
		}
		lastInCIDR := r.Addr(cidrSize - 1)
		if !prefix.Contains(lastInCIDR) || (lastInCIDR.Next().IsValid() && prefix.Contains(lastInCIDR.Next())) {
			t.Fatalf("%s: Addr(%d) = %s is not the last address of the CIDR", prefix, cidrSize-1, lastInCIDR)
		}
		if r.Contains(lastInCIDR) != v6 {
			t.Fatalf("%s: Contains(%s) = %v", prefix, lastInCIDR, r.Contains(lastInCIDR))
		}

		// A usable offset and its neighbours.
		off := r.first + int(n%uint32(r.Size()))
		ip := r.Addr(off)
		if ip.Is6() != v6 || !prefix.Contains(ip) || !r.InNetwork(ip) || !r.Contains(ip) {
			t.Fatalf("%s: Addr(%d) = %s is not a usable address of the range", prefix, off, ip)
		}
		if got, ok := r.offset(ip); !ok || got != off {
			t.Fatalf("%s: offset(%s) = %d, %v; want %d", prefix, ip, got, ok, off)
		}
		if off < r.last && r.Addr(off+1) != ip.Next() {
			t.Fatalf("%s: Addr(%d) = %s, want %s", prefix, off+1, r.Addr(off+1), ip.Next())
		}

		// An arbitrary address (the input itself, bits set past the
		// prefix) is usable exactly when it is inside, and not the network
		// or IPv4 broadcast address.
		want := prefix.Contains(addr) && addr != prefix.Addr() && (v6 || addr != lastInCIDR)
		if r.Contains(addr) != want {
			t.Fatalf("%s: Contains(%s) = %v, want %v", prefix, addr, r.Contains(addr), want)
		}
		if r.InNetwork(addr) != prefix.Contains(addr) {
			t.Fatalf("%s: InNetwork(%s) = %v", prefix, addr, r.InNetwork(addr))
		}
		if want {
			o, ok := r.offset(addr)
			if !ok || r.Addr(o) != addr {
				t.Fatalf("%s: Addr(offset(%s) = %d) = %s", prefix, addr, o, r.Addr(o))
			}
		}
	})
}
