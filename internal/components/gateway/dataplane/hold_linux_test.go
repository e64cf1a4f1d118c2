package dataplane

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestHolder holds the Gateways' addresses in a network namespace of its
// own: the node's on the interface whose network has them (the loopback
// for one outside every network), the range's others removed, its own
// released at the end; addresses outside the range are left alone.
func TestHolder(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread stays in the namespace and ends with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("a network namespace (the test runs as root): %v", err)
			return
		}
		testHolder(t)
	}()
	<-done
}

func testHolder(t *testing.T) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	// A veth pair's end stands for the node's network interface.
	eth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "peer0"}
	if err := netlink.LinkAdd(eth); err != nil {
		t.Fatal(err)
	}
	for _, l := range []netlink.Link{lo, eth} {
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	add := func(l netlink.Link, cidr string) {
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
	}
	add(eth, "198.51.100.1/24")
	add(eth, "198.51.100.103/32") // left by an earlier run, now another node's
	add(eth, "192.0.2.7/32")      // not of the range
	// The peer's end hears what the node's network would.
	peer, err := netlink.LinkByName("peer0")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(peer); err != nil {
		t.Fatal(err)
	}
	arps := listenARP(t, peer)
	held := func() map[string]string {
		addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, a := range addrs {
			l, _ := netlink.LinkByIndex(a.LinkIndex)
			out[a.IPNet.String()] = l.Attrs().Name
		}
		return out
	}
	pool := &AddressRange{First: netip.MustParseAddr("198.51.100.100"), Last: netip.MustParseAddr("198.51.100.200")}
	h := &holder{node: "a"}
	cfg := &Config{Pool: pool, Announce: []Announcement{
		{Address: netip.MustParseAddr("198.51.100.100"), Node: "a"},
		{Address: netip.MustParseAddr("198.51.100.103"), Node: "b"},
	}}
	ctx := context.Background()
	if !h.hold(ctx, cfg) {
		t.Fatal("hold failed")
	}
	got := held()
	if got["198.51.100.100/32"] != "eth0" || got["198.51.100.103/32"] != "" || got["192.0.2.7/32"] != "eth0" {
		t.Errorf("addresses %v: want 198.51.100.100 on eth0, 198.51.100.103 removed, 192.0.2.7 kept", got)
	}
	// The network hears that eth0 has it now: a gratuitous ARP request
	// from eth0's hardware address, sender and target the address.
	select {
	case p := <-arps:
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		want := append([]byte{0, 1, 8, 0, 6, 4, 0, 1}, eth0.Attrs().HardwareAddr...)
		want = append(want, 198, 51, 100, 100, 0, 0, 0, 0, 0, 0, 198, 51, 100, 100)
		if !slices.Equal(p, want) {
			t.Errorf("the ARP announcement %x, want %x", p, want)
		}
	case <-time.After(5 * time.Second):
		t.Error("no ARP announcement of 198.51.100.100 on the network")
	}

	// An address of no network the node has goes on the loopback.
	pool.Last = netip.MustParseAddr("198.51.101.10")
	cfg.Announce = append(cfg.Announce, Announcement{Address: netip.MustParseAddr("198.51.101.5"), Node: "a"})
	if !h.hold(ctx, cfg) {
		t.Fatal("hold failed")
	}
	if got := held(); got["198.51.101.5/32"] != "lo" || got["198.51.100.100/32"] != "eth0" {
		t.Errorf("addresses %v: want 198.51.101.5 on lo beside 198.51.100.100", got)
	}
	h.release(ctx)
	got = held()
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"127.0.0.1/8", "192.0.2.7/32", "198.51.100.1/24"}; !slices.Equal(keys, want) {
		t.Errorf("after release: %v, want %v", keys, want)
	}
	if _, err := net.Listen("tcp", "198.51.100.100:80"); err == nil {
		t.Error("a released address still listens")
	}
}

// listenARP returns the ARP packets link receives (their first 28
// bytes), until the test ends.
func listenARP(t *testing.T, link netlink.Link) <-chan []byte {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: link.Attrs().Index}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	out := make(chan []byte, 16)
	go func() {
		for {
			b := make([]byte, 1500)
			n, _, err := unix.Recvfrom(fd, b, 0)
			if err != nil {
				return
			}
			if n >= 28 {
				out <- b[:28]
			}
		}
	}()
	return out
}
