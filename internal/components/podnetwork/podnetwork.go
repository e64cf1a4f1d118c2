// Package podnetwork connects the Pods of every node: flannel, as k3s
// embeds it, run in the node's process (`kubeboot agent`, `kubeboot
// server --node`). kube-controller-manager gives each node a pod CIDR of
// each of the cluster's ranges (--cluster-cidr: IPv4, IPv6 or both);
// flannel's kube subnet manager reads them from the Nodes, its backend
// (vxlan by default, or host-gw) routes each node's ranges to that node,
// and its traffic manager masquerades Pods' traffic leaving the cluster's
// IPv4 range (IPv6's with --flannel-ipv6-masq). The node writes the CNI
// configuration its runtime reads: the bridge plugin on the node's pod
// CIDRs (host-local addresses), with flannel's MTU, as flannel's own CNI
// plugin would delegate to it, and portmap for host ports. The
// `none` backend leaves the CNI to the user (Calico, Cilium).
package podnetwork

import (
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
)

// DefaultCNIConf is where the node writes its CNI configuration by
// default: where containerd and CRI-O read it.
const DefaultCNIConf = "/etc/cni/net.d/10-flannel.conflist"

// annotationPrefix prefixes the annotations flannel keeps on the Nodes
// (its backend's data, the public IP), flannel's own.
const annotationPrefix = "flannel.alpha.coreos.com"

// resyncSeconds is how often the traffic manager checks its rules.
const resyncSeconds = 60

// The files of the pod network in the node's directory.
const (
	dirName        = "flannel"
	netConfName    = "net-conf.json"
	subnetFileName = "subnet.env"
)

// netConf is flannel's network configuration (its net-conf.json): a
// range of each family the cluster's Pods have. flannel enables IPv4
// unless told otherwise, so both switches are always written.
type netConf struct {
	Network        string `json:",omitempty"`
	IPv6Network    string `json:",omitempty"`
	EnableIPv4     bool
	EnableIPv6     bool
	EnableNFTables bool
	Backend        struct{ Type string }
}

// writeNetConf writes n as flannel's network configuration in dir, the
// node's, and returns its path.
func writeNetConf(dir string, n nodesettings.PodNetwork) (string, error) {
	path := filepath.Join(dir, dirName, netConfName)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	conf := netConf{EnableNFTables: useNFTables()}
	for _, r := range n.Ranges() {
		if r.Addr().Is4() {
			conf.Network, conf.EnableIPv4 = r.String(), true
		} else {
			conf.IPv6Network, conf.EnableIPv6 = r.String(), true
		}
	}
	conf.Backend.Type = n.Backend
	data, err := json.Marshal(conf)
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, data, 0o600)
}

// Node is a node of the pod network.
type Node struct {
	// Name is the Node's name.
	Name string
	// IPs are the addresses the node's traffic to other nodes leaves
	// from, one of each family (--node-ip), on one interface; none: the
	// default route's interface's.
	IPs []netip.Addr
	// Dir is the node's directory, where flannel's files go.
	Dir string
	// Network is the cluster's pod network.
	Network nodesettings.PodNetwork
	// Kubeconfig is the node's agent's (nodejoin.AgentUser): flannel
	// reads the Nodes and writes its own Node's annotations and
	// NetworkUnavailable condition. Client is a client of it.
	Kubeconfig string
	Client     kubernetes.Interface
	// CNIConf is the CNI configuration file the node writes.
	CNIConf string
}

// useNFTables reports whether the traffic rules are nftables': where the
// host has nft (knftables drives it), as kube-proxy's mode is chosen.
func useNFTables() bool {
	_, err := exec.LookPath("nft")
	return err == nil
}
