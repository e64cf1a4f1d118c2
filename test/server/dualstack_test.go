package server

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeboot/kubeboot/internal/platform/componentflags"
	"github.com/kubeboot/kubeboot/test/harness"
)

// TestDualStackNode runs `kubeboot server --node` of a dual-stack cluster
// (--cluster-cidr and --service-cidr of each family, --node-ip of each; its
// own CNI, --flannel-backend=none, as flannel here is IPv4's) on upstream's
// fake CRI runtime in a private network with an address of each family:
// the kubelet registers both as the Node's InternalIPs, and node IPAM
// gives the node a pod CIDR of each family.
func TestDualStackNode(t *testing.T) {
	requireNFT(t)
	addr, addr6 := harness.Addr(0), "2001:db8::1"
	if !harness.InNetNS(t, addr, addr6) {
		return
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	// Later flags override nodeServerArgs'.
	args := append(nodeServerArgs(t, addr, harness.StartFakeCRI(t)),
		"--service-cidr", "10.96.0.0/16,fd00:96::/112", "--cluster-cidr", "10.42.0.0/16,fd00:42::/56", "--flannel-backend=none",
		"--node-ip", addr+","+addr6)
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, filepath.Join(t.TempDir(), "server"), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := waitNode(ctx, t, srv.MustClient(t), nodeName)

	var internal []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if want := []string{addr, addr6}; !slices.Equal(internal, want) {
		t.Errorf("the Node's InternalIPs %v, want %v (its addresses: %v)", internal, want, node.Status.Addresses)
	}
	pods4, pods6 := netip.MustParsePrefix("10.42.0.0/16"), netip.MustParsePrefix("fd00:42::/56")
	if c := node.Spec.PodCIDRs; len(c) != 2 || !pods4.Contains(netip.MustParsePrefix(c[0]).Addr()) || !pods6.Contains(netip.MustParsePrefix(c[1]).Addr()) {
		t.Errorf("the Node's pod CIDRs %v, want one of %s and one of %s", c, pods4, pods6)
	}
	line, err := os.ReadFile(filepath.Join(componentflags.Dir(filepath.Join(srv.DataDir, "node")), "kubelet"))
	if err != nil || !strings.Contains(string(line), " --node-ip="+addr+","+addr6) {
		t.Errorf("the kubelet's published line does not give --node-ip=%s,%s: %v\n%s", addr, addr6, err, line)
	}
}
