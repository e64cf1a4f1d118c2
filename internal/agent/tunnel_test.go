package agent

import (
	"net/netip"
	"testing"
)

func TestAllowed(t *testing.T) {
	allow := allowed([]netip.Prefix{netip.MustParsePrefix("10.42.0.0/16")}, func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("198.51.100.2")}, nil
	})
	tests := []struct {
		addr string
		want bool
	}{
		{"10.42.1.5:443", true},
		{"[::ffff:10.42.1.5]:443", true},
		{"198.51.100.2:10250", true},
		{"198.51.100.2:30000", true},
		{"127.0.0.1:10248", false},
		{"198.51.100.3:10250", false},
		{"10.43.0.1:443", false},
		{"example.com:80", false},
		{"10.42.1.5", false},
	}
	for _, tc := range tests {
		if err := allow("tcp", tc.addr); (err == nil) != tc.want {
			t.Errorf("allow(%s): %v, want allowed %v", tc.addr, err, tc.want)
		}
	}
}
