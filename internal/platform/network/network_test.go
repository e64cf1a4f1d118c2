package network

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseServiceCIDRs(t *testing.T) {
	tests := []struct {
		name, in, want, wantErr, wantIP string
	}{
		{name: "default", in: DefaultServiceClusterIPRange, want: "10.96.0.0/12", wantIP: "10.96.0.1"},
		{name: "dual stack", in: "10.96.0.0/16,fd00::/108", want: "10.96.0.0/16,fd00::/108", wantIP: "10.96.0.1"},
		{name: "ipv6 primary", in: "fd00::/112", want: "fd00::/112", wantIP: "fd00::1"},
		{name: "too large v4", in: "10.0.0.0/8", wantErr: "the mask must be >= 12"},
		{name: "too large v6", in: "fd00::/64", wantErr: "the mask must be >= 108"},
		{name: "too small", in: "10.0.0.0/30", wantErr: "at least 8 addresses"},
		{name: "same family", in: "10.0.0.0/24,10.1.0.0/24", wantErr: "different IP family"},
		{name: "garbage", in: "ten", wantErr: "not a valid CIDR"},
		{name: "host bits", in: "10.0.0.1/24", wantErr: "host bits"},
		{name: "three", in: "10.0.0.0/24,fd00::/112,10.1.0.0/24", wantErr: "one CIDR or two"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseServiceCIDRs(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--service-cluster-ip-range") {
					t.Fatalf("error = %v, want one naming the flag and containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want || got.KubernetesServiceIP().String() != tt.wantIP {
				t.Errorf("got %s (kubernetes IP %s), want %s (%s)", got, got.KubernetesServiceIP(), tt.want, tt.wantIP)
			}
		})
	}
}

func TestParsePortRange(t *testing.T) {
	tests := []struct {
		name, in string
		want     PortRange
		wantErr  bool
	}{
		{name: "default", in: DefaultServiceNodePortRange, want: PortRange{Base: 30000, Size: 2768}},
		{name: "plus form", in: "30000+10", want: PortRange{Base: 30000, Size: 11}},
		{name: "single", in: "30000-30000", want: PortRange{Base: 30000, Size: 1}},
		{name: "reversed", in: "32767-30000", wantErr: true},
		{name: "too high", in: "30000-70000", wantErr: true},
		{name: "garbage", in: "ports", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePortRange(tt.in)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "--service-node-port-range") {
					t.Fatalf("error = %v, want one naming the flag", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if s := (PortRange{Base: 30000, Size: 2768}).String(); s != "30000-32767" {
		t.Errorf("String() = %q", s)
	}
}

// TestParseFamilies: a flag of a cluster's ranges or a host's addresses
// takes one, or two of different families, the primary first; errors
// name the flag.
func TestParseFamilies(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "10.42.0.0/16", want: "10.42.0.0/16"},
		{in: "10.42.0.0/16,2001:db8:42::/56", want: "10.42.0.0/16,2001:db8:42::/56"},
		{in: "2001:db8:42::/56, 10.42.0.0/16", want: "2001:db8:42::/56,10.42.0.0/16"},
		{in: "10.42.0.0/16,10.43.0.0/16", err: "both of one IP family"},
		{in: "10.42.0.0/16,2001:db8:42::/56,10.43.0.0/16", err: "want one CIDR, or two"},
		{in: "", err: "want one CIDR, or two"},
		{in: "10.42.0.1/16", err: "did you mean 10.42.0.0/16"},
		{in: "ten", err: `"ten" is not a valid CIDR`},
	} {
		got, err := ParsePrefixes("--cluster-cidr", tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "--cluster-cidr ") {
				t.Errorf("ParsePrefixes(%q) = %v, %v; want an error naming --cluster-cidr, saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if err != nil || strings.Join(s, ",") != tc.want {
			t.Errorf("ParsePrefixes(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "198.51.100.1", want: "198.51.100.1"},
		{in: "198.51.100.1,2001:db8::1", want: "198.51.100.1,2001:db8::1"},
		{in: "::ffff:198.51.100.1,2001:db8::1", want: "198.51.100.1,2001:db8::1"},
		{in: "2001:db8::1,2001:db8::2", err: "both of one IP family"},
		{in: "fe80::1%eth0", err: "zone"},
		{in: "node-a", err: "not a valid IP address"},
	} {
		var got []netip.Addr
		err := AddrsValue{Flag: "--node-ip", Addrs: &got}.Set(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "--node-ip ") {
				t.Errorf("--node-ip %q: %v, %v; want an error naming the flag, saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if s := (AddrsValue{Addrs: &got}).String(); err != nil || s != tc.want {
			t.Errorf("--node-ip %q = %s, %v; want %s", tc.in, s, err, tc.want)
		}
	}
}

// TestClusterDNS: the cluster DNS's addresses default to the tenth of
// each Service range; given ones must each fall in the range of their
// family.
func TestClusterDNS(t *testing.T) {
	for _, tc := range []struct {
		ranges, addrs, want, wantErr string
	}{
		{ranges: "10.96.0.0/12", want: "10.96.0.10"},
		{ranges: "10.96.0.0/16,fd00:96::/112", want: "10.96.0.10,fd00:96::a"},
		{ranges: "fd00:96::/112,10.96.0.0/16", want: "fd00:96::a,10.96.0.10"},
		{ranges: "10.96.0.0/16,fd00:96::/112", addrs: "10.96.0.53", want: "10.96.0.53"},
		{ranges: "10.96.0.0/16,fd00:96::/112", addrs: "fd00:96::53,10.96.0.53", want: "fd00:96::53,10.96.0.53"},
		{ranges: "10.96.0.0/16", addrs: "10.97.0.10", wantErr: "10.97.0.10 is not in the Service range 10.96.0.0/16"},
		{ranges: "10.96.0.0/16,fd00:96::/112", addrs: "10.96.0.10,fd00:97::a", wantErr: "fd00:97::a is not in the Service range fd00:96::/112"},
		{ranges: "10.96.0.0/16", addrs: "10.96.0.10,fd00:96::a", wantErr: "have no IPv6 range"},
	} {
		ranges, err := ParseServiceCIDRs(tc.ranges)
		if err != nil {
			t.Fatal(err)
		}
		var addrs []netip.Addr
		if tc.addrs != "" {
			if addrs, err = ParseAddrs("--cluster-dns", tc.addrs); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ClusterDNS(addrs, ranges)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ClusterDNS(%s, %s) = %v, %v; want an error with %q", tc.addrs, tc.ranges, got, err, tc.wantErr)
			}
			continue
		}
		if s := (AddrsValue{Addrs: &got}).String(); err != nil || s != tc.want {
			t.Errorf("ClusterDNS(%s, %s) = %s, %v; want %s", tc.addrs, tc.ranges, s, err, tc.want)
		}
	}
}

// TestInterfaceAddrOf: the loopback interface's IPv6 address is found
// from its IPv4 one; an address of no interface is an error.
func TestInterfaceAddrOf(t *testing.T) {
	if _, err := InterfaceOf(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Fatalf("no loopback interface here: %v", err)
	}
	// ::1 is no global unicast address: the loopback has none of IPv6.
	if a, err := InterfaceAddrOf(netip.MustParseAddr("127.0.0.1"), IPv6); err == nil {
		t.Errorf("InterfaceAddrOf(127.0.0.1, IPv6) = %s, want an error: ::1 is not global", a)
	}
	if _, err := InterfaceAddrOf(netip.MustParseAddr("192.0.2.99"), IPv6); err == nil || !strings.Contains(err.Error(), "no interface of this host has 192.0.2.99") {
		t.Errorf("InterfaceAddrOf(192.0.2.99) error = %v", err)
	}
}

// TestHostIPv6: a host whose kernel has no IPv6, or has it turned off,
// says so in one line.
func TestHostIPv6(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"IPv6 on", map[string]string{"net/if_inet6": "", "sys/net/ipv6/conf/all/disable_ipv6": "0\n"}, ""},
		{"turned off", map[string]string{"net/if_inet6": "", "sys/net/ipv6/conf/all/disable_ipv6": "1\n"}, "turned off"},
		{"no IPv6 in the kernel", map[string]string{}, "no IPv6"},
	} {
		proc := t.TempDir()
		for name, content := range tc.files {
			path := filepath.Join(proc, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := HostIPv6(proc)
		if (err == nil) != (tc.wantErr == "") || err != nil && (!strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
