package clusterip

import (
	"encoding/binary"
	"net/netip"
)

// Range is the usable part of one Service CIDR. Offsets count from the
// network address; offset 0 (the network address) and, for IPv4, the
// broadcast address are never handed out. The first usable address is the
// kubernetes Service's.
type Range struct {
	prefix netip.Prefix
	// first and last are the usable offsets, inclusive.
	first, last int
	// reserved is how many low offsets, from first, dynamic allocation
	// avoids: they are kept for Services that ask for a specific IP.
	reserved int
}

// NewRange returns the usable range of prefix, which must be masked and
// hold at most 2^20 addresses (as the flags are validated).
func NewRange(prefix netip.Prefix) Range {
	hostBits := prefix.Addr().BitLen() - prefix.Bits()
	size := 1 << hostBits
	r := Range{prefix: prefix.Masked(), first: 1, last: size - 1}
	if prefix.Addr().Is4() {
		r.last = size - 2
	}
	usable := r.last - r.first + 1
	// kube-apiserver's split: min(max(16, size/16), 256) low addresses are
	// for static allocation; ranges of 16 or fewer are not split.
	if size > 16 {
		r.reserved = min(max(16, size/16), 256)
	}
	if r.reserved > usable {
		r.reserved = 0
	}
	return r
}

// Prefix is the Service CIDR.
func (r Range) Prefix() netip.Prefix { return r.prefix }

// Size is the number of usable addresses.
func (r Range) Size() int { return r.last - r.first + 1 }

// Contains reports whether ip is a usable address of the range.
func (r Range) Contains(ip netip.Addr) bool {
	off, ok := r.offset(ip)
	return ok && off >= r.first && off <= r.last
}

// InNetwork reports whether ip is inside the CIDR at all (usable or not).
func (r Range) InNetwork(ip netip.Addr) bool { return r.prefix.Contains(ip) }

// Addr returns the address at offset.
func (r Range) Addr(offset int) netip.Addr {
	b := r.prefix.Addr().As16()
	low := binary.BigEndian.Uint64(b[8:]) + uint64(offset)
	binary.BigEndian.PutUint64(b[8:], low)
	a := netip.AddrFrom16(b)
	if r.prefix.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

func (r Range) offset(ip netip.Addr) (int, bool) {
	ip = ip.Unmap()
	if !r.prefix.Contains(ip) {
		return 0, false
	}
	a, base := ip.As16(), r.prefix.Addr().As16()
	return int(binary.BigEndian.Uint64(a[8:]) - binary.BigEndian.Uint64(base[8:])), true
}

// String formats the usable range as "first-last" addresses.
func (r Range) String() string { return r.prefix.String() }
