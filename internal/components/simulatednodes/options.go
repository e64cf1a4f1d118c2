package simulatednodes

import (
	"fmt"
	"math/big"
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
	// not allocate pod CIDRs (NodeIPAM): its Pods' IPs are from it. With
	// node IPAM, the server makes it IPAM's range when --cluster-cidr's
	// default is too small for Count.
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
	DefaultPodCIDR = "10.128.0.0/10"
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
	fs.StringVar(&o.PodCIDR, "simulated-node-cidr", o.PodCIDR, "The range the simulated nodes' pod CIDRs (a /24 each) come from with --allocate-node-cidrs=false; with node IPAM, its range when --cluster-cidr is not given and its default holds fewer node CIDRs than --simulated-nodes.")
	fs.DurationVar(&o.LeaseDuration, "simulated-node-lease-duration", o.LeaseDuration, "The simulated nodes' lease duration; they renew their leases every quarter of it, as the kubelet.")
	fs.DurationVar(&o.PodStartupDelay, "simulated-pod-startup-delay", o.PodStartupDelay, "How long a Pod bound to a simulated node stays Pending before its containers run and it is Ready.")
}

// Validate checks the values; each error names its flag. With ipam (see
// Run) the nodes' pod CIDRs come from kube-controller-manager's ranges,
// which the caller checks against Count, so only --simulated-node-cidr's
// form is checked.
func (o *Options) Validate(ipam *NodeIPAM) []error {
	var errs []error
	if o.Count < 0 {
		errs = append(errs, fmt.Errorf("--simulated-nodes %d must not be negative", o.Count))
	}
	if _, err := o.podCIDRs(ipam == nil); err != nil {
		errs = append(errs, err)
	}
	if err := o.validateMemory(); err != nil {
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

// podCIDRs returns PodCIDR, masked, checked to hold a node CIDR for each of
// Count nodes when counted.
func (o *Options) podCIDRs(counted bool) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(o.PodCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() > nodeMaskSize {
		return netip.Prefix{}, fmt.Errorf("--simulated-node-cidr %q must be an IPv4 CIDR of /%d or larger", o.PodCIDR, nodeMaskSize)
	}
	if n := nodeMaskSize - p.Bits(); counted && n < bits.UintSize-1 && o.Count > 1<<n {
		return netip.Prefix{}, fmt.Errorf("--simulated-node-cidr %s holds %d node CIDRs of /%d, fewer than --simulated-nodes %d", p, 1<<n, nodeMaskSize, o.Count)
	}
	return p.Masked(), nil
}

// NodeIPAM is kube-controller-manager's node IPAM (--allocate-node-cidrs):
// its ranges (--cluster-cidr, one per IP family) and the prefix length of
// a node's CIDR in each (--node-cidr-mask-size*). Simulated nodes then
// register with their pod CIDRs taken from the end of each range, the
// i-th node the i-th from the end, which the allocator marks as used when
// it sees them; it hands other nodes CIDRs from the start. Left to the
// allocator, a node is written by it and by the node lifecycle
// controller at once as it registers, and the allocator, its cache not
// yet holding its own write, allocates a second CIDR, is refused, and
// logs an error (upstream's race, and a write per node).
type NodeIPAM struct {
	ClusterCIDRs []netip.Prefix
	MaskSizes    []int
}

// Holds checks that each range holds a node CIDR for each of count nodes;
// the error names the range that does not.
func (ipam *NodeIPAM) Holds(count int) error {
	for i, cidr := range ipam.ClusterCIDRs {
		mask := ipam.MaskSizes[i]
		if bits := mask - cidr.Bits(); bits < 0 || (bits < 31 && count > 1<<bits) {
			return fmt.Errorf("%s holds %d node CIDRs of /%d, not one for each of --simulated-nodes=%d", cidr, 1<<max(bits, 0), mask, count)
		}
	}
	return nil
}

// cidrPlan gives node i its pod CIDRs: the i-th from the start of each
// range, or with fromEnd from the end.
type cidrPlan struct {
	ranges  []netip.Prefix
	sizes   []int
	fromEnd bool
}

// plan is where the nodes' pod CIDRs come from: ipam's ranges when it is
// set, else PodCIDR.
func (o *Options) plan(ipam *NodeIPAM) (cidrPlan, error) {
	if ipam != nil {
		return cidrPlan{ranges: ipam.ClusterCIDRs, sizes: ipam.MaskSizes, fromEnd: true}, nil
	}
	p, err := o.podCIDRs(true)
	if err != nil {
		return cidrPlan{}, err
	}
	return cidrPlan{ranges: []netip.Prefix{p}, sizes: []int{nodeMaskSize}}, nil
}

// node returns node i's pod CIDRs.
func (c cidrPlan) node(i int) []string {
	cidrs := make([]string, len(c.ranges))
	for k, r := range c.ranges {
		n := big.NewInt(int64(i))
		if c.fromEnd {
			// The last index: 2^(size - range bits) - 1.
			last := new(big.Int).Lsh(big.NewInt(1), uint(c.sizes[k]-r.Bits()))
			n.Sub(last.Sub(last, big.NewInt(1)), n)
		}
		cidrs[k] = subnet(r, c.sizes[k], n).String()
	}
	return cidrs
}

// subnet is the n-th prefix of length size in r (n counts from 0).
func subnet(r netip.Prefix, size int, n *big.Int) netip.Prefix {
	a := r.Masked().Addr()
	v := new(big.Int).SetBytes(a.AsSlice())
	v.Add(v, new(big.Int).Lsh(n, uint(a.BitLen()-size)))
	addr, _ := netip.AddrFromSlice(v.FillBytes(make([]byte, a.BitLen()/8)))
	return netip.PrefixFrom(addr, size)
}
