package podnetwork

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flannel-io/flannel/pkg/subnet"

	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
)

func TestCheckCNIConf(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{name: "an existing directory", path: filepath.Join(dir, "10-flannel.conflist")},
		{name: "directories to make", path: filepath.Join(dir, "a", "b", "10-flannel.conflist")},
		{name: "under a file", path: filepath.Join(file, "net.d", "10-flannel.conflist"), wantErr: "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckCNIConf(tc.path)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--flannel-cni-conf")) {
				t.Errorf("CheckCNIConf(%s) = %v, want an error saying %q", tc.path, err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Dir(tc.path)); tc.path != filepath.Join(dir, "10-flannel.conflist") && err == nil {
				t.Errorf("the check made %s", filepath.Dir(tc.path))
			}
		})
	}
}

func TestWriteCNIConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.d", "10-flannel.conflist")
	podCIDRs := []netip.Prefix{netip.MustParsePrefix("10.42.3.0/24"), netip.MustParsePrefix("fd00:42:0:3::/64")}
	if err := writeCNIConf(path, podCIDRs, 1450); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string
			MTU  int
			IPAM struct {
				Type   string
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	// One range set per family: host-local gives a Pod an address of each.
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[0].MTU != 1450 ||
		conf.Plugins[0].IPAM.Type != "host-local" || len(conf.Plugins[0].IPAM.Ranges) != 2 ||
		conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.42.3.0/24" || conf.Plugins[0].IPAM.Ranges[1][0].Subnet != "fd00:42:0:3::/64" ||
		conf.Plugins[1].Type != "portmap" {
		t.Errorf("CNI configuration:\n%s\nwant the bridge on 10.42.3.0/24 and fd00:42:0:3::/64 with MTU 1450, then portmap", data)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
}

// TestWriteNetConf: flannel reads the network configuration the node
// writes as a range of each of the cluster's families, IPv4 off in an
// IPv6-only cluster (flannel's default is on).
func TestWriteNetConf(t *testing.T) {
	for _, tc := range []struct {
		name, clusterCIDR string
		want4, want6      string
	}{
		{"IPv4", "10.42.0.0/16", "10.42.0.0/16", ""},
		{"dual-stack", "10.42.0.0/16,fd00:42::/56", "10.42.0.0/16", "fd00:42::/56"},
		{"dual-stack, IPv6 first", "fd00:42::/56,10.42.0.0/16", "10.42.0.0/16", "fd00:42::/56"},
		{"IPv6", "fd00:42::/56", "", "fd00:42::/56"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, err := writeNetConf(t.TempDir(), nodesettings.PodNetwork{ClusterCIDR: tc.clusterCIDR, Backend: nodesettings.VXLAN})
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			config, err := subnet.ParseConfig(string(data))
			if err != nil {
				t.Fatalf("flannel's ParseConfig(%s): %v", data, err)
			}
			if err := subnet.CheckNetworkConfig(config); err != nil {
				t.Fatalf("flannel's CheckNetworkConfig(%s): %v", data, err)
			}
			if config.EnableIPv4 != (tc.want4 != "") || config.EnableIPv6 != (tc.want6 != "") || config.BackendType != nodesettings.VXLAN {
				t.Errorf("%s: IPv4 %v, IPv6 %v, backend %s; want IPv4 %v, IPv6 %v, vxlan", data, config.EnableIPv4, config.EnableIPv6, config.BackendType, tc.want4 != "", tc.want6 != "")
			}
			if tc.want4 != "" && config.Network.String() != tc.want4 {
				t.Errorf("%s: IPv4 network %s, want %s", data, config.Network, tc.want4)
			}
			if tc.want6 != "" && config.IPv6Network.String() != tc.want6 {
				t.Errorf("%s: IPv6 network %s, want %s", data, config.IPv6Network, tc.want6)
			}
		})
	}
}

// TestExtInterface: flannel is told the node's interface by its IPv4
// address, or, on an IPv6-only node, by the name of the interface that
// holds its address, with each family's address as the one other nodes
// reach.
func TestExtInterface(t *testing.T) {
	for _, tc := range []struct {
		name            string
		nodeIPs         string
		wantIface       string
		want4, want6    string
		wantErrContains string
	}{
		{name: "none: the default route's", nodeIPs: ""},
		{name: "IPv4", nodeIPs: "127.0.0.1", wantIface: "127.0.0.1", want4: "127.0.0.1"},
		{name: "dual-stack, IPv6 first", nodeIPs: "::1,127.0.0.1", wantIface: "127.0.0.1", want4: "127.0.0.1", want6: "::1"},
		{name: "IPv6 only: by name", nodeIPs: "::1", wantIface: "lo", want6: "::1"},
		{name: "IPv6 only, on no interface", nodeIPs: "2001:db8::99", wantErrContains: "--node-ip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ips []netip.Addr
			for _, s := range strings.Split(tc.nodeIPs, ",") {
				if s != "" {
					ips = append(ips, netip.MustParseAddr(s))
				}
			}
			iface, public, err := extInterface(ips)
			if tc.wantErrContains != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContains) {
					t.Fatalf("extInterface(%s) = %q, %v; want an error naming %s", tc.nodeIPs, iface, err, tc.wantErrContains)
				}
				return
			}
			if err != nil || iface != tc.wantIface || public.PublicIP != tc.want4 || public.PublicIPv6 != tc.want6 {
				t.Errorf("extInterface(%s) = %q, %+v, %v; want %q, IPv4 %q, IPv6 %q", tc.nodeIPs, iface, public, err, tc.wantIface, tc.want4, tc.want6)
			}
		})
	}
}
