package nodesettings

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	valid := Settings{ClusterDomain: DefaultClusterDomain, PodNetwork: PodNetwork{ClusterCIDR: "10.42.0.0/16", Backend: VXLAN}}
	for _, tc := range []struct {
		name    string
		edit    func(*Settings)
		wantErr string // a substring; "" is valid
	}{
		{"defaults with a pod network", func(*Settings) {}, ""},
		{"no pod network needs no range", func(s *Settings) { s.PodNetwork = PodNetwork{Backend: None} }, ""},
		{"an empty backend is none", func(s *Settings) { s.PodNetwork = PodNetwork{} }, ""},
		{"host-gw", func(s *Settings) { s.PodNetwork.Backend = HostGW }, ""},
		{"unknown backend", func(s *Settings) { s.PodNetwork.Backend = "wireguard" }, "--flannel-backend"},
		{"pod network without a range", func(s *Settings) { s.PodNetwork.ClusterCIDR = "" }, "--cluster-cidr"},
		{"pod network on IPv6", func(s *Settings) { s.PodNetwork.ClusterCIDR = "fd00:42::/56" }, ""},
		{"pod network dual-stack", func(s *Settings) { s.PodNetwork.ClusterCIDR = "10.42.0.0/16,fd00:42::/56" }, ""},
		{"pod network dual-stack, IPv6 first, masqueraded", func(s *Settings) {
			s.PodNetwork.ClusterCIDR, s.PodNetwork.IPv6Masq = "fd00:42::/56,10.42.0.0/16", true
		}, ""},
		{"IPv6 masquerade without an IPv6 range", func(s *Settings) { s.PodNetwork.IPv6Masq = true }, "--flannel-ipv6-masq"},
		{"IPv6 masquerade without a pod network", func(s *Settings) {
			s.PodNetwork = PodNetwork{ClusterCIDR: "fd00:42::/56", IPv6Masq: true}
		}, "--flannel-ipv6-masq"},
		{"pod network of two IPv4 ranges", func(s *Settings) { s.PodNetwork.ClusterCIDR = "10.42.0.0/16,10.43.0.0/16" }, "--cluster-cidr"},
		{"no pod network, dual-stack", func(s *Settings) { s.PodNetwork = PodNetwork{ClusterCIDR: "10.42.0.0/16,fd00:42::/56", Backend: None} }, ""},
		{"domain not a domain", func(s *Settings) { s.ClusterDomain = "Cluster_Local" }, "--cluster-domain"},
		{"both wrong, both named", func(s *Settings) { s.ClusterDomain, s.PodNetwork.Backend = "", "x" }, "--cluster-domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			tc.edit(&s)
			err := s.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error naming %s", err, tc.wantErr)
			}
		})
	}
}

// TestJSON: the settings' JSON form, which crosses the join protocol and
// stays in each node's cluster.json, keeps its keys, and reads the
// cluster.json kubeboot wrote before the settings were one type.
func TestJSON(t *testing.T) {
	s := Settings{ClusterDomain: "cluster.local", ClusterDNS: Addrs{netip.MustParseAddr("10.96.0.10")},
		PodNetwork: PodNetwork{ClusterCIDR: "10.42.0.0/16,fd00:42::/56", Backend: VXLAN, IPv6Masq: true}, LocalStorage: true, EmbeddedRegistry: true, NetworkPolicy: true}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"clusterDomain":"cluster.local","clusterDNS":"10.96.0.10","podNetwork":{"clusterCIDR":"10.42.0.0/16,fd00:42::/56","backend":"vxlan","ipv6Masq":true},` +
		`"localStorage":true,"embeddedRegistry":true,"networkPolicy":true}`
	if string(data) != want {
		t.Errorf("JSON:\n got %s\nwant %s", data, want)
	}
	var back Settings
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, s) {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, s)
	}
	if data, _ := json.Marshal(Settings{}); string(data) != "{}" {
		t.Errorf("the zero settings' JSON = %s, want {}", data)
	}

	var old Settings
	if err := json.Unmarshal([]byte(`{"podNetwork":{"ClusterCIDR":"10.42.0.0/16","Backend":"host-gw"},"localStorage":true}`), &old); err != nil {
		t.Fatal(err)
	}
	if want := (Settings{PodNetwork: PodNetwork{ClusterCIDR: "10.42.0.0/16", Backend: HostGW}, LocalStorage: true}); !reflect.DeepEqual(old, want) {
		t.Errorf("an older cluster.json read as %+v, want %+v", old, want)
	}
}

// TestClusterDNSJSON: one cluster DNS address is written as a string, as
// older agents and cluster.json files read it; one of each family as a
// list; either is read back.
func TestClusterDNSJSON(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::a")
	for _, tc := range []struct {
		addrs Addrs
		json  string
	}{
		{nil, `{}`},
		{Addrs{v4}, `{"clusterDNS":"10.96.0.10"}`},
		{Addrs{v6}, `{"clusterDNS":"fd00:96::a"}`},
		{Addrs{v4, v6}, `{"clusterDNS":["10.96.0.10","fd00:96::a"]}`},
		{Addrs{v6, v4}, `{"clusterDNS":["fd00:96::a","10.96.0.10"]}`},
	} {
		data, err := json.Marshal(Settings{ClusterDNS: tc.addrs})
		if err != nil || string(data) != tc.json {
			t.Errorf("%v: JSON = %s, %v; want %s", tc.addrs, data, err, tc.json)
		}
		var back Settings
		if err := json.Unmarshal([]byte(tc.json), &back); err != nil || !reflect.DeepEqual(back.ClusterDNS, tc.addrs) {
			t.Errorf("%s read as %v, %v; want %v", tc.json, back.ClusterDNS, err, tc.addrs)
		}
	}
	for _, bad := range []string{`{"clusterDNS":"10.96.0"}`, `{"clusterDNS":["10.96.0.10",1]}`, `{"clusterDNS":5}`} {
		var s Settings
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s read as %v, want an error", bad, s.ClusterDNS)
		}
	}
}
