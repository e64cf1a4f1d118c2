package harness

import (
	"os/exec"
	"strings"
	"testing"
)

// Stack is a test cluster's IP families: which of its machines'
// addresses it uses and the ranges its Pods and Services take. Its value
// crosses to a second machine as a string (StartMachine's env).
type Stack string

const (
	// StackIPv4 is IPv4 alone.
	StackIPv4 Stack = "IPv4"
	// StackDual is dual-stack, IPv4 primary.
	StackDual Stack = "dual-stack"
	// StackIPv6 is IPv6 alone.
	StackIPv6 Stack = "IPv6"
)

// ServiceCIDRs are the Services' ranges, primary first.
func (s Stack) ServiceCIDRs() []string {
	return map[Stack][]string{StackIPv4: {"10.96.0.0/16"}, StackDual: {"10.96.0.0/16", "fd00:96::/112"}, StackIPv6: {"fd00:96::/112"}}[s]
}

// ClusterCIDR is the Pods' ranges, as --cluster-cidr takes them; "" for
// IPv4: the server's default.
func (s Stack) ClusterCIDR() string {
	return map[Stack]string{StackDual: "10.42.0.0/16,fd00:42::/56", StackIPv6: "fd00:42::/56"}[s]
}

// Families is how many IP families the stack has.
func (s Stack) Families() int {
	if s == StackDual {
		return 2
	}
	return 1
}

// Addrs are, of a machine's IPv4 and IPv6 addresses, those of the
// stack's families, as --node-ip takes them.
func (s Stack) Addrs(v4, v6 string) string {
	switch s {
	case StackDual:
		return v4 + "," + v6
	case StackIPv6:
		return v6
	}
	return v4
}

// Primary is, of a machine's IPv4 and IPv6 addresses, the stack's
// primary family's.
func (s Stack) Primary(v4, v6 string) string {
	if s == StackIPv6 {
		return v6
	}
	return v4
}

// RouteOut routes ranges out of dev, as a default route would: a test's
// machines have none, and their hosts reach the Services' ranges only
// through one (kube-proxy's DNAT comes after the routing decision). A
// route there already is replaced: a benchmark's namespace outlives its
// runs.
func RouteOut(t testing.TB, dev string, ranges []string) {
	t.Helper()
	for _, r := range ranges {
		if out, err := exec.Command("ip", "route", "replace", r, "dev", dev).CombinedOutput(); err != nil {
			t.Fatalf("ip route replace %s dev %s: %v: %s", r, dev, err, strings.TrimSpace(string(out)))
		}
	}
}
