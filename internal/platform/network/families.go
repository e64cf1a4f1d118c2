package network

import (
	"fmt"
	"net/netip"
	"strings"
)

// A cluster is IPv4, IPv6, or dual-stack: each flag that names its
// ranges or a host's addresses (--cluster-cidr, --node-ip) takes one value,
// or two of different families separated by a comma, the primary first,
// as kube-apiserver's --service-cluster-ip-range and the kubelet's
// --node-ip do.

// ParsePrefixes parses flag's value s: one CIDR, or two of different IP
// families separated by a comma. Errors name the flag.
func ParsePrefixes(flag, s string) ([]netip.Prefix, error) {
	return parseFamilies(flag, s, "CIDR", func(s string) (netip.Prefix, bool, error) {
		p, err := netip.ParsePrefix(s)
		if err == nil && p != p.Masked() {
			err = fmt.Errorf("it has host bits set; did you mean %s?", p.Masked())
		}
		return p, p.Addr().Is4(), err
	})
}

// ParseAddrs parses flag's value s: one IP address, or two of different
// families separated by a comma. Errors name the flag.
func ParseAddrs(flag, s string) ([]netip.Addr, error) {
	return parseFamilies(flag, s, "IP address", func(s string) (netip.Addr, bool, error) {
		a, err := netip.ParseAddr(s)
		if err == nil && a.Zone() != "" {
			err = fmt.Errorf("an address with a zone is a link's, not the cluster's")
		}
		return a.Unmap(), a.Unmap().Is4(), err
	})
}

func parseFamilies[T any](flag, s, what string, parse func(string) (T, bool, error)) ([]T, error) {
	parts := strings.Split(s, ",")
	if s == "" || len(parts) > 2 {
		return nil, fmt.Errorf("%s %q: want one %s, or two of different IP families separated by a comma", flag, s, what)
	}
	var out []T
	var is4 []bool
	for _, p := range parts {
		v, four, err := parse(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %q is not a valid %s: %w", flag, s, p, what, err)
		}
		out, is4 = append(out, v), append(is4, four)
	}
	if len(out) == 2 && is4[0] == is4[1] {
		return nil, fmt.Errorf("%s %q: both of one IP family; a dual-stack cluster has one %s of each", flag, s, what)
	}
	return out, nil
}

// Family is an IP family: "IPv4" or "IPv6".
type Family string

// The IP families.
const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// FamilyOf is addr's family.
func FamilyOf(addr netip.Addr) Family {
	if addr.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Families are the families of prefixes, in their order.
func Families(prefixes ...netip.Prefix) []Family {
	out := make([]Family, len(prefixes))
	for i, p := range prefixes {
		out[i] = FamilyOf(p.Addr())
	}
	return out
}

// AddrsValue is a flag (a pflag.Value) of one IP address, or two of
// different families separated by a comma (ParseAddrs).
type AddrsValue struct {
	// Flag is the flag's name as errors give it, --node-ip.
	Flag  string
	Addrs *[]netip.Addr
}

func (v AddrsValue) String() string {
	if v.Addrs == nil {
		return ""
	}
	s := make([]string, len(*v.Addrs))
	for i, a := range *v.Addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// Set parses s; "" is none.
func (v AddrsValue) Set(s string) error {
	if s == "" {
		*v.Addrs = nil
		return nil
	}
	addrs, err := ParseAddrs(v.Flag, s)
	if err != nil {
		return err
	}
	*v.Addrs = addrs
	return nil
}

// Type is the value's type as --help shows it.
func (AddrsValue) Type() string { return "ips" }
