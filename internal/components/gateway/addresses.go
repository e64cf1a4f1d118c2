package gateway

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
)

// ParseAddressRange parses --gateway-addresses: a prefix
// ("198.51.100.96/28", its addresses but an IPv4 network's first and
// last) or a range ("198.51.100.100-198.51.100.120").
func ParseAddressRange(s string) (dataplane.AddressRange, error) {
	if first, last, ok := strings.Cut(s, "-"); ok {
		f, err := netip.ParseAddr(strings.TrimSpace(first))
		if err != nil {
			return dataplane.AddressRange{}, err
		}
		l, err := netip.ParseAddr(strings.TrimSpace(last))
		if err != nil {
			return dataplane.AddressRange{}, err
		}
		if f.Is4() != l.Is4() || l.Less(f) {
			return dataplane.AddressRange{}, fmt.Errorf("%s is no range: its first address must come before its last, in one family", s)
		}
		return dataplane.AddressRange{First: f.Unmap(), Last: l.Unmap()}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return dataplane.AddressRange{}, fmt.Errorf("%s is neither a prefix (198.51.100.96/28) nor a range (198.51.100.100-198.51.100.120)", s)
	}
	p = p.Masked()
	r := dataplane.AddressRange{First: p.Addr(), Last: lastOf(p)}
	if p.Addr().Is4() && p.Bits() < 31 {
		r.First, r.Last = r.First.Next(), r.Last.Prev()
	}
	return r, nil
}

// lastOf is p's last address.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// addressRangeValue is --gateway-addresses as a flag's value.
type addressRangeValue struct{ r **dataplane.AddressRange }

func (v addressRangeValue) Set(s string) error {
	r, err := ParseAddressRange(s)
	if err != nil {
		return err
	}
	*v.r = &r
	return nil
}

func (v addressRangeValue) String() string {
	if *v.r == nil {
		return ""
	}
	return (*v.r).String()
}

func (addressRangeValue) Type() string { return "range" }

// assignAddresses gives each Gateway (oldest first) an address of pool:
// the one its spec asks for, else the one its status has (so that it
// keeps it), else the lowest free; none when the pool has none left, or
// when the address it asks for cannot be its own, whose reason unusable
// gives.
func assignAddresses(pool dataplane.AddressRange, gateways []*gatewayv1.Gateway) (own map[types.NamespacedName]netip.Addr, unusable map[types.NamespacedName]string) {
	own, unusable = map[types.NamespacedName]netip.Addr{}, map[types.NamespacedName]string{}
	taken := map[netip.Addr]types.NamespacedName{}
	for _, g := range gateways {
		if !asks(g) {
			continue
		}
		addr, why := requested(pool, g.Spec.Addresses)
		if other, ok := taken[addr]; why == "" && ok {
			why = fmt.Sprintf("%s is Gateway %s's", addr, other)
		}
		if why != "" {
			unusable[nameOf(g)] = why
			continue
		}
		own[nameOf(g)], taken[addr] = addr, nameOf(g)
	}
	for _, g := range gateways {
		if asks(g) {
			continue
		}
		for _, a := range g.Status.Addresses {
			addr, err := netip.ParseAddr(a.Value)
			if _, ok := taken[addr]; err == nil && pool.Contains(addr) && !ok {
				own[nameOf(g)], taken[addr] = addr, nameOf(g)
				break
			}
		}
	}
	next := pool.First
	for _, g := range gateways {
		if _, ok := own[nameOf(g)]; ok || asks(g) {
			continue
		}
		for _, ok := taken[next]; next.IsValid() && pool.Contains(next) && ok; _, ok = taken[next] {
			next = next.Next()
		}
		if !next.IsValid() || !pool.Contains(next) {
			break
		}
		own[nameOf(g)], taken[next] = next, nameOf(g)
	}
	return own, unusable
}

// asks reports whether g's spec.addresses ask for a particular address:
// one without a value asks for any.
func asks(g *gatewayv1.Gateway) bool {
	return slices.ContainsFunc(g.Spec.Addresses, func(a gatewayv1.GatewaySpecAddress) bool { return a.Value != "" })
}

// requested is the address of the pool a Gateway's spec.addresses ask
// for, or why they ask for none kubeboot can give: one IPAddress of the
// pool (supportedAddresses has refused the other types).
func requested(pool dataplane.AddressRange, addresses []gatewayv1.GatewaySpecAddress) (netip.Addr, string) {
	if len(addresses) > 1 {
		return netip.Addr{}, "A Gateway has one address of its own; spec.addresses asks for several"
	}
	addr, err := netip.ParseAddr(addresses[0].Value)
	if err != nil {
		return netip.Addr{}, fmt.Sprintf("spec.addresses[0]: %q is no IP address", addresses[0].Value)
	}
	if !pool.Contains(addr.Unmap()) {
		return netip.Addr{}, fmt.Sprintf("spec.addresses[0]: %s is not of the Gateways' range %s (--gateway-addresses)", addr, pool)
	}
	return addr.Unmap(), ""
}

// supportedAddresses says why a Gateway's spec.addresses cannot be
// accepted, if they cannot: an address of another type than IPAddress,
// or any without --gateway-addresses.
func supportedAddresses(pool *dataplane.AddressRange, addresses []gatewayv1.GatewaySpecAddress) string {
	if len(addresses) == 0 {
		return ""
	}
	if pool == nil {
		return "kubeboot's Gateways have the addresses of the nodes that serve them; spec.addresses needs a range of the Gateways' own (--gateway-addresses)"
	}
	for i, a := range addresses {
		if t := ptr.Deref(a.Type, gatewayv1.IPAddressType); t != gatewayv1.IPAddressType {
			return fmt.Sprintf("spec.addresses[%d]: type %s is not supported: IPAddress is", i, t)
		}
	}
	return ""
}

// announcer is the node of nodes (sorted) that holds address: one by the
// address's hash, so that the pool's addresses spread over the nodes and
// each stays where it is while they do.
func announcer(address netip.Addr, nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	h := fnv.New32a()
	b, _ := address.MarshalBinary()
	h.Write(b)
	return nodes[h.Sum32()%uint32(len(nodes))]
}
