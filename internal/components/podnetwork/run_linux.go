package podnetwork

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/flannel-io/flannel/pkg/backend"
	_ "github.com/flannel-io/flannel/pkg/backend/hostgw" // the host-gw backend
	_ "github.com/flannel-io/flannel/pkg/backend/vxlan"  // the vxlan backend
	"github.com/flannel-io/flannel/pkg/ip"
	"github.com/flannel-io/flannel/pkg/ipmatch"
	"github.com/flannel-io/flannel/pkg/subnet/kube"
	"github.com/flannel-io/flannel/pkg/trafficmngr"
	"github.com/flannel-io/flannel/pkg/trafficmngr/iptables"
	"github.com/flannel-io/flannel/pkg/trafficmngr/nftables"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/network"
)

// CheckCNIConf reports, naming the flag, whether the node could write its
// CNI configuration at path, without writing it.
func CheckCNIConf(path string) error {
	// The nearest directory that exists must be writable.
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("--flannel-cni-conf %s: %s is not a directory", path, dir)
			}
			if err := unix.Access(dir, unix.W_OK); err != nil {
				return fmt.Errorf("--flannel-cni-conf %s: directory %s is not writable: %w", path, dir, err)
			}
			return nil
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// Run runs the node's pod network until ctx is done (with none, it only
// waits): it waits for the node's pod CIDR, sets flannel's network up,
// writes the CNI configuration, and then follows the other nodes.
func Run(ctx context.Context, node Node) error {
	if !node.Network.Enabled() {
		<-ctx.Done()
		return nil
	}
	logger := klog.FromContext(ctx).WithName("podnetwork")
	ctx = klog.NewContext(ctx, logger)
	podCIDRs, err := waitPodCIDRs(ctx, node)
	if err != nil {
		return err
	}
	// flannel's kube subnet manager takes its node's name from the
	// environment, as a DaemonSet's Pod has it; the process runs one node.
	if err := os.Setenv("NODE_NAME", node.Name); err != nil {
		return err
	}
	netConf, err := writeNetConf(node.Dir, node.Network)
	if err != nil {
		return fmt.Errorf("flannel's network configuration: %w", err)
	}
	sm, err := kube.NewSubnetManager(ctx, "", node.Kubeconfig, annotationPrefix, netConf, true)
	if err != nil {
		return fmt.Errorf("flannel: %w", err)
	}
	config, err := sm.GetNetworkConfig(ctx)
	if err != nil {
		return fmt.Errorf("flannel: %w", err)
	}
	ipStack, err := ipmatch.GetIPFamily(config.EnableIPv4, config.EnableIPv6)
	if err != nil {
		return fmt.Errorf("flannel: %w", err)
	}
	iface, public, err := extInterface(node.IPs)
	if err != nil {
		return fmt.Errorf("flannel: the node's interface: %w", err)
	}
	extIface, err := ipmatch.LookupExtIface(iface, "", "", ipStack, public)
	if err != nil {
		return fmt.Errorf("flannel: the node's interface: %w", err)
	}
	be, err := backend.NewManager(ctx, sm, extIface).GetBackend(config.BackendType)
	if err != nil {
		return fmt.Errorf("flannel: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	bn, err := be.RegisterNetwork(ctx, &wg, config)
	if err != nil {
		return fmt.Errorf("flannel's %s backend: %w", config.BackendType, err)
	}
	traffic := trafficManager()
	if err := traffic.Init(ctx); err != nil {
		return fmt.Errorf("flannel's traffic rules: %w", err)
	}
	// IPv4 is always masqueraded, IPv6 where --flannel-ipv6-masq says.
	var masq6 ip.IP6Net
	if node.Network.IPv6Masq {
		masq6 = config.IPv6Network
	}
	if err := traffic.SetupAndEnsureMasqRules(ctx, config.Network, ip.IP4Net{}, ip.IP4Net{}, masq6, ip.IP6Net{}, ip.IP6Net{},
		bn.Lease(), resyncSeconds, false); err != nil {
		return fmt.Errorf("flannel's masquerade rules: %w", err)
	}
	traffic.SetupAndEnsureForwardRules(ctx, config.Network, config.IPv6Network, resyncSeconds)
	if err := sm.HandleSubnetFile(filepath.Join(node.Dir, dirName, subnetFileName), config, true, bn.Lease().Subnet, bn.Lease().IPv6Subnet, bn.MTU()); err != nil {
		return fmt.Errorf("flannel's subnet file: %w", err)
	}
	for _, podCIDR := range podCIDRs {
		lease := bn.Lease().Subnet.String()
		if podCIDR.Addr().Is6() {
			lease = bn.Lease().IPv6Subnet.String()
		}
		if lease != podCIDR.String() {
			return fmt.Errorf("flannel took %s, but node %s's pod CIDR is %s", lease, node.Name, podCIDR)
		}
	}
	if err := writeCNIConf(node.CNIConf, podCIDRs, bn.MTU()); err != nil {
		return fmt.Errorf("--flannel-cni-conf %s: %w", node.CNIConf, err)
	}
	logger.Info("The pod network is up", "backend", config.BackendType, "podCIDRs", podCIDRs, "interface", extIface.Iface.Name, "mtu", bn.MTU())
	wg.Add(1)
	go func() {
		defer wg.Done()
		bn.Run(ctx)
	}()
	// Marks the Node's network available.
	if err := sm.CompleteLease(ctx, bn.Lease(), &wg); err != nil && ctx.Err() == nil {
		return fmt.Errorf("flannel: %w", err)
	}
	<-ctx.Done()
	return nil
}

// extInterface is how flannel is told the node's interface, from the
// node's addresses (none: the default route's interface): by its IPv4
// address, each family's address the one the other nodes reach. An
// IPv6-only node's interface is given by name, as flannel, given an IPv6
// address to find it by, takes that address for the IPv4 one too, which
// its host-gw backend then refuses as a NAT.
func extInterface(nodeIPs []netip.Addr) (string, ipmatch.PublicIPOpts, error) {
	var public ipmatch.PublicIPOpts
	for _, a := range nodeIPs {
		if a.Is4() {
			public.PublicIP = a.String()
		} else {
			public.PublicIPv6 = a.String()
		}
	}
	if len(nodeIPs) == 0 || public.PublicIP != "" {
		return public.PublicIP, public, nil
	}
	iface, err := network.InterfaceOf(nodeIPs[0])
	if err != nil {
		return "", public, fmt.Errorf("--node-ip: %w", err)
	}
	return iface.Name, public, nil
}

// waitPodCIDRs waits until the node has registered and
// kube-controller-manager has given it a pod CIDR of each of the
// cluster's ranges, and returns them, primary first.
func waitPodCIDRs(ctx context.Context, node Node) ([]netip.Prefix, error) {
	want := max(len(node.Network.Ranges()), 1)
	var podCIDRs []netip.Prefix
	logged := false
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := node.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil || len(n.Spec.PodCIDRs) < want {
			if !logged {
				klog.FromContext(ctx).Info("Waiting for the node's pod CIDRs", "node", node.Name, "ranges", want)
				logged = true
			}
			return false, nil
		}
		podCIDRs = podCIDRs[:0]
		for _, c := range n.Spec.PodCIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return false, fmt.Errorf("node %s's pod CIDR %q: %w", node.Name, c, err)
			}
			podCIDRs = append(podCIDRs, p)
		}
		return true, nil
	})
	return podCIDRs, err
}

// trafficManager is flannel's manager of the masquerade and forward
// rules, in nftables or iptables as useNFTables says.
func trafficManager() trafficmngr.TrafficManager {
	if useNFTables() {
		return &nftables.NFTablesManager{}
	}
	return &iptables.IPTablesManager{}
}

// writeCNIConf writes the node's CNI configuration, replacing the file
// at once so that the runtime never reads half of it.
func writeCNIConf(path string, podCIDRs []netip.Prefix, mtu int) error {
	// host-local gives each Pod an address of each range.
	var ranges [][]map[string]string
	for _, c := range podCIDRs {
		ranges = append(ranges, []map[string]string{{"subnet": c.String()}})
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kubeboot",
		"plugins": []any{
			map[string]any{
				"type":             "bridge",
				"bridge":           "cni0",
				"mtu":              mtu,
				"isGateway":        true,
				"isDefaultGateway": true,
				"hairpinMode":      true,
				// flannel's traffic manager masquerades what leaves the
				// cluster's range.
				"ipMasq": false,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": ranges,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	// Root's only, as the CIS benchmark asks (1.1.9): the runtime reads
	// it as root.
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
