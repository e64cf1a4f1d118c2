package controlplane

import (
	"fmt"
	"net/netip"
	"slices"
)

// The backends of a pod network (PodNetwork.Backend), flannel's.
const (
	PodNetworkVXLAN  = "vxlan"
	PodNetworkHostGW = "host-gw"
	PodNetworkNone   = "none"
)

// PodNetworkBackends are the backends a PodNetwork may have.
var PodNetworkBackends = []string{PodNetworkVXLAN, PodNetworkHostGW, PodNetworkNone}

// PodNetwork is the cluster's pod network: the range the nodes' pod CIDRs
// come from and how flannel carries Pods' traffic between nodes.
type PodNetwork struct {
	// ClusterCIDR is the Pods' range, kube-controller-manager's
	// --cluster-cidr, which gives each node a pod CIDR of it.
	ClusterCIDR string
	// Backend is flannel's backend (--flannel-backend): vxlan, host-gw,
	// or none (no pod network; "" too).
	Backend string
}

// Enabled reports whether the nodes run a pod network.
func (n PodNetwork) Enabled() bool { return n.Backend != "" && n.Backend != PodNetworkNone }

// Validate checks the network; each problem names its flag.
func (n PodNetwork) Validate() error {
	if n.Backend != "" && !slices.Contains(PodNetworkBackends, n.Backend) {
		return fmt.Errorf("--flannel-backend %q: not one of %v", n.Backend, PodNetworkBackends)
	}
	if !n.Enabled() {
		return nil
	}
	if p, err := netip.ParsePrefix(n.ClusterCIDR); err != nil || !p.Addr().Is4() {
		return fmt.Errorf("--cluster-cidr %q: the %s pod network needs one IPv4 range (--flannel-backend=none leaves the pod network to you)", n.ClusterCIDR, n.Backend)
	}
	return nil
}
