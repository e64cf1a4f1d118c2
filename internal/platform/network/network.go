// Package network parses and checks the Service network flags of
// kube-apiserver: --service-cluster-ip-range and --service-node-port-range.
package network

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Defaults: the Service range is kubeadm's (kube-apiserver's deprecated
// one is 10.0.0.0/24, 256 addresses), the NodePort range kube-apiserver's.
const (
	DefaultServiceClusterIPRange = "10.96.0.0/12"
	DefaultServiceNodePortRange  = "30000-32767"
	// maxServiceRangeBits bounds a service range to 2^20 addresses, the
	// most kube-apiserver accepts (the range is tracked in etcd).
	maxServiceRangeBits = 20
	// minServiceRangeBits: a range needs room for the kubernetes Service
	// and a few more.
	minServiceRangeBits = 3
)

// ServiceCIDRs are the primary and (for dual-stack) secondary Service
// ranges.
type ServiceCIDRs struct {
	Primary   netip.Prefix
	Secondary netip.Prefix // invalid when single-stack
}

// ParseServiceCIDRs parses --service-cluster-ip-range: one CIDR, or two of
// different families separated by a comma.
func ParseServiceCIDRs(s string) (ServiceCIDRs, error) {
	const flag = "--service-cluster-ip-range"
	parts := strings.Split(s, ",")
	if s == "" || len(parts) > 2 {
		return ServiceCIDRs{}, fmt.Errorf("%s must be one CIDR or two of different IP families separated by a comma, got %q", flag, s)
	}
	var out ServiceCIDRs
	for i, p := range parts {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil {
			return ServiceCIDRs{}, fmt.Errorf("%s: %q is not a valid CIDR: %v", flag, p, err)
		}
		if prefix != prefix.Masked() {
			return ServiceCIDRs{}, fmt.Errorf("%s: %q has host bits set; did you mean %q?", flag, p, prefix.Masked())
		}
		hostBits := prefix.Addr().BitLen() - prefix.Bits()
		if hostBits > maxServiceRangeBits {
			return ServiceCIDRs{}, fmt.Errorf("specified %s is too large; for %d-bit addresses, the mask must be >= %d",
				flag, prefix.Addr().BitLen(), prefix.Addr().BitLen()-maxServiceRangeBits)
		}
		if hostBits < minServiceRangeBits {
			return ServiceCIDRs{}, fmt.Errorf("specified %s %q is too small; it must hold at least 8 addresses", flag, p)
		}
		if i == 0 {
			out.Primary = prefix
		} else {
			out.Secondary = prefix
		}
	}
	if out.Secondary.IsValid() && out.Primary.Addr().Is4() == out.Secondary.Addr().Is4() {
		return ServiceCIDRs{}, fmt.Errorf("%s[0] and %s[1] must be of different IP family", flag, flag)
	}
	return out, nil
}

// All returns the configured prefixes, primary first.
func (c ServiceCIDRs) All() []netip.Prefix {
	if c.Secondary.IsValid() {
		return []netip.Prefix{c.Primary, c.Secondary}
	}
	return []netip.Prefix{c.Primary}
}

// String formats the ranges as the flag does.
func (c ServiceCIDRs) String() string {
	var s []string
	for _, p := range c.All() {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}

// Of is the range of family f; invalid if there is none.
func (c ServiceCIDRs) Of(f Family) netip.Prefix {
	for _, p := range c.All() {
		if p.IsValid() && FamilyOf(p.Addr()) == f {
			return p
		}
	}
	return netip.Prefix{}
}

// KubernetesServiceIP is the first address of the primary range: the
// ClusterIP of the default/kubernetes Service.
func (c ServiceCIDRs) KubernetesServiceIP() netip.Addr {
	return c.Primary.Addr().Next()
}

// PortRange is an inclusive range of ports.
type PortRange struct {
	Base, Size int
}

// ParsePortRange parses --service-node-port-range, "low-high" or "low+size".
func ParsePortRange(s string) (PortRange, error) {
	const flag = "--service-node-port-range"
	var low, high int
	var err error
	switch {
	case strings.Contains(s, "-"):
		lo, hi, _ := strings.Cut(s, "-")
		if low, err = strconv.Atoi(strings.TrimSpace(lo)); err == nil {
			high, err = strconv.Atoi(strings.TrimSpace(hi))
		}
	case strings.Contains(s, "+"):
		lo, size, _ := strings.Cut(s, "+")
		var n int
		if low, err = strconv.Atoi(strings.TrimSpace(lo)); err == nil {
			n, err = strconv.Atoi(strings.TrimSpace(size))
			high = low + n
		}
	default:
		err = fmt.Errorf("want low-high")
	}
	if err != nil {
		return PortRange{}, fmt.Errorf("%s: invalid port range %q: %v", flag, s, err)
	}
	if low < 1 || high > 65535 || high < low {
		return PortRange{}, fmt.Errorf("%s: invalid port range %q: ports must be within 1-65535, low <= high", flag, s)
	}
	return PortRange{Base: low, Size: high - low + 1}, nil
}

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Base && port < r.Base+r.Size }

// String formats the range as kube-apiserver's messages do: "30000-32767".
func (r PortRange) String() string {
	return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1)
}

// ClusterDNS are the cluster DNS's addresses: addrs if any, each in the
// Service range of its family, else the tenth address of each range
// (kubeadm's 10.96.0.10 in 10.96.0.0/12; k3s's of each family on a
// dual-stack cluster), in the ranges' order.
func ClusterDNS(addrs []netip.Addr, ranges ServiceCIDRs) ([]netip.Addr, error) {
	if len(addrs) > 0 {
		for _, a := range addrs {
			r := ranges.Of(FamilyOf(a))
			if !r.IsValid() {
				return nil, fmt.Errorf("%s: the Service ranges (%s) have no %s range", a, ranges, FamilyOf(a))
			}
			if !r.Contains(a) {
				return nil, fmt.Errorf("%s is not in the Service range %s", a, r)
			}
		}
		return addrs, nil
	}
	var out []netip.Addr
	for _, r := range ranges.All() {
		a := r.Masked().Addr()
		for range 10 {
			a = a.Next()
		}
		if !r.Contains(a) {
			return nil, fmt.Errorf("the Service range %s has no tenth address for it", r)
		}
		out = append(out, a)
	}
	return out, nil
}
