package simulatednodes

import (
	"fmt"
	"math/bits"
	"net/netip"
	"time"

	"github.com/spf13/pflag"
)

// Options are the settings of the simulated nodes: `kubeboot server
// --simulated-nodes=N` and its companions.
type Options struct {
	// Count is how many simulated nodes there are (--simulated-nodes):
	// simulated-0 ... simulated-<Count-1>. Nodes beyond it left by an
	// earlier start are deleted.
	Count int
	// PodCIDR is the range a node's pod CIDR (a /24 each, in name order)
	// comes from (--simulated-node-cidr), when kube-controller-manager does
	// not allocate them (--allocate-node-cidrs): its Pods' IPs are from it.
	PodCIDR string
	// LeaseDuration is the nodes' lease duration, renewed every quarter of
	// it, as the kubelet's (--simulated-node-lease-duration).
	LeaseDuration time.Duration
	// PodStartupDelay is how long a Pod bound to a simulated node stays
	// Pending before its containers run and it is Ready
	// (--simulated-pod-startup-delay).
	PodStartupDelay time.Duration
}

// Defaults.
const (
	DefaultPodCIDR = "10.128.0.0/12"
	// DefaultLeaseDuration is the kubelet's --node-lease-duration-seconds.
	DefaultLeaseDuration = 40 * time.Second
	// nodeMaskSize is the prefix length of a node's pod CIDR, as
	// kube-controller-manager's --node-cidr-mask-size for IPv4.
	nodeMaskSize = 24
)

// NewOptions returns the defaults: no simulated nodes.
func NewOptions() *Options {
	return &Options{PodCIDR: DefaultPodCIDR, LeaseDuration: DefaultLeaseDuration}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Count, "simulated-nodes", o.Count, "How many simulated nodes to run in the process (kwok's controllers): Ready nodes with capacity, "+
		"kept alive through node leases, whose Pods run, become Ready and finish as on a kubelet, without containers.")
	fs.StringVar(&o.PodCIDR, "simulated-node-cidr", o.PodCIDR, "The range the simulated nodes' pod CIDRs (a /24 each) come from, unless --allocate-node-cidrs allocates them.")
	fs.DurationVar(&o.LeaseDuration, "simulated-node-lease-duration", o.LeaseDuration, "The simulated nodes' lease duration; they renew their leases every quarter of it, as the kubelet.")
	fs.DurationVar(&o.PodStartupDelay, "simulated-pod-startup-delay", o.PodStartupDelay, "How long a Pod bound to a simulated node stays Pending before its containers run and it is Ready.")
}

// Validate checks the values; each error names its flag.
func (o *Options) Validate() []error {
	var errs []error
	if o.Count < 0 {
		errs = append(errs, fmt.Errorf("--simulated-nodes %d must not be negative", o.Count))
	}
	if _, err := o.podCIDRs(); err != nil {
		errs = append(errs, err)
	}
	if o.LeaseDuration < time.Second || o.LeaseDuration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--simulated-node-lease-duration %s must be whole seconds, at least 1s (a lease's duration is in seconds)", o.LeaseDuration))
	}
	if o.PodStartupDelay < 0 {
		errs = append(errs, fmt.Errorf("--simulated-pod-startup-delay %s must not be negative", o.PodStartupDelay))
	}
	return errs
}

// podCIDRs returns the first address of PodCIDR and how many node CIDRs
// it holds, checked against Count.
func (o *Options) podCIDRs() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(o.PodCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() > nodeMaskSize {
		return netip.Prefix{}, fmt.Errorf("--simulated-node-cidr %q must be an IPv4 CIDR of /%d or larger", o.PodCIDR, nodeMaskSize)
	}
	if n := nodeMaskSize - p.Bits(); n < bits.UintSize-1 && o.Count > 1<<n {
		return netip.Prefix{}, fmt.Errorf("--simulated-node-cidr %s holds %d node CIDRs of /%d, fewer than --simulated-nodes %d", p, 1<<n, nodeMaskSize, o.Count)
	}
	return p.Masked(), nil
}
