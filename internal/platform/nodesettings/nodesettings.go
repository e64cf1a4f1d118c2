// Package nodesettings is the cluster's settings that every node runs
// with, declared once: the cluster DNS, the pod network, local storage, the
// embedded registry mirror and NetworkPolicy enforcement. The server's
// flags set them (controlplane.Config.Nodes), its completion resolves
// them, the join protocol hands them to agents (clusterjoin's
// AgentCredentials carry them in their JSON form) and each node keeps them
// in its cluster.json for its next start (hostnode). A new node-wide
// setting is one field here and one flag.
package nodesettings

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeboot/kubeboot/internal/platform/network"
)

// DefaultClusterDomain is the cluster's DNS domain unless --cluster-domain
// says otherwise, as the kubelet's and kubeadm's.
const DefaultClusterDomain = "cluster.local"

// The backends of a pod network (PodNetwork.Backend), flannel's.
const (
	VXLAN  = "vxlan"
	HostGW = "host-gw"
	None   = "none"
)

// Backends are the backends a PodNetwork may have.
var Backends = []string{VXLAN, HostGW, None}

// Settings are what every node of a cluster runs with. The zero value is
// no pod network, no local storage, no registry mirror, no NetworkPolicy
// enforcement and no cluster DNS; Validate says what is wrong with one
// set from flags. Their JSON form is the join protocol's (clusterjoin) and
// cluster.json's (hostnode): keep the keys.
type Settings struct {
	// ClusterDomain is the DNS domain of Services (--cluster-domain): the
	// kubelets' clusterDomain and cluster DNS's zone; the API server's
	// certificate names kubernetes.default.svc.<ClusterDomain> and its
	// service account issuer defaults to that URL. Default:
	// DefaultClusterDomain (controlplane.NewConfig).
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// ClusterDNS are the cluster DNS's addresses (--cluster-dns), one of
	// each family at most: the kube-dns Service's ClusterIPs and the
	// kubelets' clusterDNS. Unset on a server: the tenth address of each
	// Service range (kubeadm's 10.96.0.10), which the control plane's
	// completion fills in.
	ClusterDNS Addrs `json:"clusterDNS,omitempty"`
	// PodNetwork is the cluster's pod network, which podnetwork runs on
	// each node. Zero: none, the nodes' CNI is the user's.
	PodNetwork PodNetwork `json:"podNetwork,omitzero"`
	// LocalStorage is whether the nodes make the volumes of the claims
	// placed on them (localstorage; on unless --disable=local-storage).
	LocalStorage bool `json:"localStorage,omitempty"`
	// EmbeddedRegistry is whether the nodes serve each other the images
	// their runtimes hold, for the registries their registries.yaml
	// mirrors (registrymirror; --embedded-registry).
	EmbeddedRegistry bool `json:"embeddedRegistry,omitempty"`
	// NetworkPolicy is whether the nodes enforce their Pods'
	// NetworkPolicies (networkpolicy; on unless --disable=network-policy),
	// on kubeboot's pod network.
	NetworkPolicy bool `json:"networkPolicy,omitempty"`
}

// PodNetwork is the cluster's pod network: the range the nodes' pod CIDRs
// come from and how flannel carries Pods' traffic between nodes.
type PodNetwork struct {
	// ClusterCIDR is the Pods' range, kube-controller-manager's
	// --cluster-cidr, which gives each node a pod CIDR of it.
	ClusterCIDR string `json:"clusterCIDR,omitempty"`
	// Backend is flannel's backend (--flannel-backend): vxlan, host-gw,
	// or none (no pod network; "" too).
	Backend string `json:"backend,omitempty"`
	// IPv6Masq is whether the Pods' IPv6 traffic leaving the cluster's
	// range is masqueraded to the node's address (--flannel-ipv6-masq,
	// k3s's flag). Off by default, as k3s's: IPv6 pod ranges are often
	// routed; the IPv4 range is always masqueraded.
	IPv6Masq bool `json:"ipv6Masq,omitempty"`
}

// Addrs are IP addresses whose JSON form is one address as a string, as
// the single cluster DNS address was written before a cluster had one of
// each family (older cluster.json files and agents read and write it so),
// and several as a list.
type Addrs []netip.Addr

// Strings are the addresses as strings, as the kubelet's clusterDNS and a
// Service's clusterIPs list them.
func (a Addrs) Strings() []string {
	out := make([]string, len(a))
	for i, addr := range a {
		out[i] = addr.String()
	}
	return out
}

// MarshalJSON writes one address as a string, several as a list.
func (a Addrs) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]netip.Addr(a))
}

// UnmarshalJSON reads an address or a list of them.
func (a *Addrs) UnmarshalJSON(data []byte) error {
	if len(data) == 0 || data[0] != '"' {
		return json.Unmarshal(data, (*[]netip.Addr)(a))
	}
	var one netip.Addr
	if err := json.Unmarshal(data, &one); err != nil {
		return err
	}
	*a = nil
	if one.IsValid() {
		*a = Addrs{one}
	}
	return nil
}

// Enabled reports whether the nodes run a pod network.
func (n PodNetwork) Enabled() bool { return n.Backend != "" && n.Backend != None }

// Validate checks the settings a server's flags set; each problem names
// its flag. The cluster DNS's address is checked against the Service
// range where that is known (controlplane's completion).
func (s Settings) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(s.ClusterDomain); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-domain %q: %s", s.ClusterDomain, strings.Join(msgs, "; ")))
	}
	return errors.Join(append(errs, s.PodNetwork.validate())...)
}

func (n PodNetwork) validate() error {
	if n.Backend != "" && !slices.Contains(Backends, n.Backend) {
		return fmt.Errorf("--flannel-backend %q: not one of %v", n.Backend, Backends)
	}
	if !n.Enabled() {
		if n.IPv6Masq {
			return fmt.Errorf("--flannel-ipv6-masq: there is no pod network to masquerade (--flannel-backend %s)", cmp.Or(n.Backend, None))
		}
		return nil
	}
	// flannel carries one range of each family (vxlan and host-gw both).
	pods, err := network.ParsePrefixes("--cluster-cidr", n.ClusterCIDR)
	if err != nil {
		return err
	}
	if n.IPv6Masq && !slices.Contains(network.Families(pods...), network.IPv6) {
		return fmt.Errorf("--flannel-ipv6-masq: the Pods' ranges (--cluster-cidr %s) have no IPv6 range", n.ClusterCIDR)
	}
	return nil
}

// Ranges are the Pods' ranges, primary first (Validate first; none where
// ClusterCIDR does not parse).
func (n PodNetwork) Ranges() []netip.Prefix {
	pods, _ := network.ParsePrefixes("--cluster-cidr", n.ClusterCIDR)
	return pods
}
