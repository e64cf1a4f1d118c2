package hostnode

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
)

// TestClusterSettings: a node keeps the cluster's settings for its next
// start, and reads a cluster.json kubeboot wrote before it held the
// cluster DNS, which then comes from the kubelet's configuration, or
// before the cluster DNS had an address of each family.
func TestClusterSettings(t *testing.T) {
	settings := nodesettings.Settings{ClusterDomain: "example.org", ClusterDNS: nodesettings.Addrs{netip.MustParseAddr("10.43.0.10")},
		PodNetwork: nodesettings.PodNetwork{ClusterCIDR: "10.42.0.0/16", Backend: nodesettings.HostGW}, LocalStorage: true, EmbeddedRegistry: true}
	dualStack := settings
	dualStack.ClusterDNS = nodesettings.Addrs{netip.MustParseAddr("10.43.0.10"), netip.MustParseAddr("fd00:43::a")}
	dualStack.PodNetwork.ClusterCIDR = "10.42.0.0/16,fd00:42::/56"
	for _, tc := range []struct {
		name        string
		clusterJSON string // "": written by writeClusterSettings
		want        nodesettings.Settings
	}{
		{name: "kept", want: settings},
		{name: "kept, dual-stack", want: dualStack},
		{name: "an older cluster.json", clusterJSON: `{"podNetwork":{"ClusterCIDR":"10.42.0.0/16","Backend":"host-gw"},"localStorage":true,"embeddedRegistry":true}`,
			want: settings},
		{name: "a cluster.json of one cluster DNS address", want: settings,
			clusterJSON: `{"clusterDomain":"example.org","clusterDNS":"10.43.0.10","podNetwork":{"clusterCIDR":"10.42.0.0/16","backend":"host-gw"},"localStorage":true,"embeddedRegistry":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := writeKubeletConfig(dir, filepath.Join(dir, kubeletConfigName), Cluster{CA: []byte("CA"), Settings: tc.want}, nil); err != nil {
				t.Fatal(err)
			}
			var err error
			if tc.clusterJSON == "" {
				err = writeClusterSettings(dir, tc.want)
			} else {
				err = os.WriteFile(filepath.Join(dir, clusterSettingsName), []byte(tc.clusterJSON), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := JoinedCluster(dir)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.CA) != "CA" || !reflect.DeepEqual(got.Settings, tc.want) {
				t.Errorf("JoinedCluster = %+v, want settings %+v", got, tc.want)
			}
		})
	}
}
