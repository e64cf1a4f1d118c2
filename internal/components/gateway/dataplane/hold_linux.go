package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// holder keeps on the node's network the Gateways' own addresses the
// Config gives the node, and none other of their range: an address is
// added to the interface whose network holds it (the kernel then answers
// ARP and neighbour solicitations for it), or to the loopback interface
// when none does (reached by routes the network's operator sets).
type holder struct {
	node string
	// pool is the last range seen, whose addresses the node removes
	// when the range goes.
	pool *AddressRange
}

// hold adds the node's addresses and removes the range's others; it
// reports whether every change took.
func (h *holder) hold(ctx context.Context, cfg *Config) bool {
	if cfg.Pool != nil {
		h.pool = cfg.Pool
	}
	if h.pool == nil {
		return true
	}
	want := map[netip.Addr]bool{}
	for _, a := range cfg.Announce {
		if a.Node == h.node && cfg.Pool != nil {
			want[a.Address] = true
		}
	}
	if err := h.sync(ctx, want); err != nil {
		klog.FromContext(ctx).Error(err, "Holding the Gateways' addresses on the node's network; tried again")
		return false
	}
	return true
}

// release removes every address of the range the node holds.
func (h *holder) release(ctx context.Context) {
	if h.pool == nil {
		return
	}
	if err := h.sync(ctx, nil); err != nil {
		klog.FromContext(ctx).Error(err, "Releasing the Gateways' addresses")
	}
}

// sync makes the range's addresses on the node's interfaces want.
func (h *holder) sync(ctx context.Context, want map[netip.Addr]bool) error {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("listing the node's addresses: %w", err)
	}
	var errs []error
	have := map[netip.Addr]bool{}
	for _, a := range addrs {
		addr, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		addr = addr.Unmap()
		ones, bits := a.Mask.Size()
		if ones != bits || !h.pool.Contains(addr) {
			continue
		}
		if want[addr] {
			have[addr] = true
			continue
		}
		link, err := netlink.LinkByIndex(a.LinkIndex)
		if err == nil {
			err = netlink.AddrDel(link, &a)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", addr, err))
			continue
		}
		klog.FromContext(ctx).Info("Released a Gateway's address", "address", addr)
	}
	for addr := range want {
		if have[addr] {
			continue
		}
		link, err := linkFor(addrs, addr)
		if err == nil {
			err = netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("adding %s: %w", addr, err))
			continue
		}
		klog.FromContext(ctx).Info("Holding a Gateway's address", "address", addr, "interface", link.Attrs().Name)
		if err := announce(link, addr); err != nil {
			// The address is held: clients whose ARP caches name its last
			// holder reach this one once their caches expire.
			klog.FromContext(ctx).Error(err, "Announcing a Gateway's address on its network", "address", addr, "interface", link.Attrs().Name)
		}
	}
	return errors.Join(errs...)
}

// announce tells addr's network that link now has it, with a gratuitous
// ARP request (RFC 5227's ARP Announcement), so that the hosts and
// switches that cached its last holder's hardware address move to
// link's at once rather than when their caches expire. Only IPv4 on
// Ethernet: a loopback has no neighbours to tell.
func announce(link netlink.Link, addr netip.Addr) error {
	mac := link.Attrs().HardwareAddr
	if !addr.Is4() || len(mac) != 6 || link.Attrs().Flags&net.FlagLoopback != 0 {
		return nil
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	if err != nil {
		return fmt.Errorf("an ARP socket: %w", err)
	}
	defer unix.Close(fd)
	ip := addr.As4()
	// Hardware type Ethernet, protocol IPv4, their lengths, operation
	// request; sender and target the address, target hardware unknown.
	packet := []byte{0, 1, 8, 0, 6, 4, 0, 1}
	packet = append(packet, mac...)
	packet = append(packet, ip[:]...)
	packet = append(packet, 0, 0, 0, 0, 0, 0)
	packet = append(packet, ip[:]...)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: link.Attrs().Index, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	return unix.Sendto(fd, packet, 0, to)
}

// htons is v in network byte order, as AF_PACKET takes protocols.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// linkFor is the interface whose network (an address's prefix, not a
// single address's) holds addr, else the loopback interface.
func linkFor(addrs []netlink.Addr, addr netip.Addr) (netlink.Link, error) {
	for _, a := range addrs {
		ones, bits := a.Mask.Size()
		if ones == bits || !a.IPNet.Contains(addr.AsSlice()) {
			continue
		}
		return netlink.LinkByIndex(a.LinkIndex)
	}
	return netlink.LinkByName("lo")
}
