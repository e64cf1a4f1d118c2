package clusterip

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
)

// span is the addresses of one Service CIDR that can be ClusterIPs: all
// but the network address and, for IPv4, the broadcast address. Its lower
// static addresses are kept for requested IPs (KEP-3070): dynamic
// allocation takes them only once the upper part is full.
type span struct {
	prefix      netip.Prefix
	first, last netip.Addr
	// size counts the addresses from first to last, at most MaxUint64.
	size uint64
	// static is min(max(16, cidr size/16), 256), or 0 for a CIDR of 16
	// addresses or fewer: kube-apiserver's split.
	static uint64
}

// newSpan returns the span of prefix; ok is false if it has no usable
// address or more than 64 host bits (kube-apiserver's allocator refuses
// those too).
func newSpan(prefix netip.Prefix) (span, bool) {
	prefix = prefix.Masked()
	hostBits := prefix.Addr().BitLen() - prefix.Bits()
	if hostBits == 0 || hostBits > 64 || (prefix.Addr().Is4() && hostBits == 1) {
		return span{}, false
	}
	s := span{prefix: prefix, first: prefix.Addr().Next(), last: lastAddr(prefix)}
	cidrSize := uint64(math.MaxUint64)
	if hostBits < 64 {
		cidrSize = 1 << hostBits
	}
	s.size = cidrSize - 1 // the network address
	if prefix.Addr().Is4() {
		s.size-- // the broadcast address
	}
	const minStatic, maxStatic, step = 16, 256, 16
	if cidrSize > minStatic {
		s.static = min(max(cidrSize/step, minStatic), maxStatic)
	}
	return s, true
}

// contains reports whether addr is one of the span's addresses.
func (s span) contains(addr netip.Addr) bool {
	return s.first.Compare(addr) <= 0 && addr.Compare(s.last) <= 0
}

// next returns a free address, free deciding, starting at a random place
// (rnd(n) returns a number in [0, n)) of the dynamic part of the span and
// wrapping around it, then of the static part; ok is false if none is free.
func (s span) next(rnd func(uint64) uint64, free func(netip.Addr) bool) (netip.Addr, bool) {
	if dynamic := s.size - s.static; dynamic > 0 {
		if addr, ok := scan(add(s.first, s.static), dynamic, rnd(dynamic), free); ok {
			return addr, true
		}
	}
	if s.static == 0 {
		return netip.Addr{}, false
	}
	return scan(s.first, s.static, rnd(s.static), free)
}

// scan looks at the n addresses from lo, starting at lo+start and wrapping
// around, for the first that is free.
func scan(lo netip.Addr, n, start uint64, free func(netip.Addr) bool) (netip.Addr, bool) {
	addr, pos := add(lo, start), start
	for range n {
		if free(addr) {
			return addr, true
		}
		if pos++; pos == n {
			addr, pos = lo, 0
		} else {
			addr = addr.Next()
		}
	}
	return netip.Addr{}, false
}

// add returns addr+n, within addr's family (callers stay inside a prefix).
func add(addr netip.Addr, n uint64) netip.Addr {
	b := addr.As16()
	lo, carry := bits.Add64(binary.BigEndian.Uint64(b[8:]), n, 0)
	hi := binary.BigEndian.Uint64(b[:8]) + carry
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	out := netip.AddrFrom16(b)
	if addr.Is4() {
		return out.Unmap()
	}
	return out
}

// lastAddr is the prefix's broadcast address, or the one before it for
// IPv4.
func lastAddr(prefix netip.Prefix) netip.Addr {
	b := prefix.Addr().As16()
	hostBits := prefix.Addr().BitLen() - prefix.Bits()
	for i := len(b) - 1; hostBits > 0; i-- {
		n := min(hostBits, 8)
		b[i] |= byte(1<<n - 1)
		hostBits -= n
	}
	last := netip.AddrFrom16(b)
	if prefix.Addr().Is4() {
		return last.Unmap().Prev()
	}
	return last
}
