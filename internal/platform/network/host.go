package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// InterfaceOf is the host's interface that has addr.
func InterfaceOf(addr netip.Addr) (net.Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return net.Interface{}, err
	}
	for _, iface := range ifaces {
		for _, a := range interfaceAddrs(iface) {
			if a == addr.Unmap() {
				return iface, nil
			}
		}
	}
	return net.Interface{}, fmt.Errorf("no interface of this host has %s", addr)
}

// InterfaceAddrOf is the first global unicast address of family on the
// host's interface that has addr: where a host reached at addr is
// reached over the other family.
func InterfaceAddrOf(addr netip.Addr, family Family) (netip.Addr, error) {
	iface, err := InterfaceOf(addr)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range interfaceAddrs(iface) {
		if FamilyOf(a) == family && a.IsGlobalUnicast() {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s, the interface of %s, has no %s address", iface.Name, addr, family)
}

// interfaceAddrs are iface's addresses; none if they cannot be read.
func interfaceAddrs(iface net.Interface) []netip.Addr {
	addrs, err := iface.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// HostIPv6 reports, in one line, why this host cannot carry IPv6, if it
// cannot: the kernel without IPv6, or IPv6 turned off
// (net.ipv6.conf.all.disable_ipv6). proc is /proc, or a test's copy.
func HostIPv6(proc string) error {
	if _, err := os.Stat(filepath.Join(proc, "net", "if_inet6")); err != nil {
		return errors.New("this host's kernel has no IPv6 (no /proc/net/if_inet6)")
	}
	data, err := os.ReadFile(filepath.Join(proc, "sys", "net", "ipv6", "conf", "all", "disable_ipv6"))
	if err == nil && strings.TrimSpace(string(data)) != "0" {
		return errors.New("this host has IPv6 turned off (sysctl net.ipv6.conf.all.disable_ipv6=1)")
	}
	return nil
}
