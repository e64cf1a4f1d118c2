package options

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	msoptions "sigs.k8s.io/metrics-server/cmd/metrics-server/app/options"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/agenttunnel"
	"github.com/kubeboot/kubeboot/internal/components/autodeploy"
	"github.com/kubeboot/kubeboot/internal/components/cloudnode"
	"github.com/kubeboot/kubeboot/internal/components/clusterdns"
	"github.com/kubeboot/kubeboot/internal/components/etcdsnapshotfiles"
	"github.com/kubeboot/kubeboot/internal/components/gateway"
	"github.com/kubeboot/kubeboot/internal/components/helmcontroller"
	"github.com/kubeboot/kubeboot/internal/components/hostnode"
	"github.com/kubeboot/kubeboot/internal/components/kubecontrollermanager"
	"github.com/kubeboot/kubeboot/internal/components/kubeletclient"
	"github.com/kubeboot/kubeboot/internal/components/kubeletserving"
	"github.com/kubeboot/kubeboot/internal/components/kubescheduler"
	"github.com/kubeboot/kubeboot/internal/components/localstorage"
	"github.com/kubeboot/kubeboot/internal/components/metricsserver"
	"github.com/kubeboot/kubeboot/internal/components/networkpolicy"
	"github.com/kubeboot/kubeboot/internal/components/registrymirror"
	"github.com/kubeboot/kubeboot/internal/components/servicelb"
	"github.com/kubeboot/kubeboot/internal/components/simulatednodes"
	"github.com/kubeboot/kubeboot/internal/platform/network"
	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
)

// controllerManagerFlags are the kube-controller-manager flags `kubeboot
// server` has under their own names: what users of a small cluster tune.
// The rest go through --controller-manager-arg. The leader election flags
// are the scheduler's too (sharedLeaderElectionFlags).
var controllerManagerFlags = []groupFlag{
	{"controllers", ""}, {"leader-elect", ""}, {"leader-elect-lease-duration", ""}, {"leader-elect-renew-deadline", ""}, {"leader-elect-retry-period", ""},
	{"allocate-node-cidrs", ""}, {"cluster-cidr", ""}, {"node-cidr-mask-size", ""}, {"node-cidr-mask-size-ipv4", ""}, {"node-cidr-mask-size-ipv6", ""},
	{"cluster-name", ""}, {"use-service-account-credentials", ""},
	{"node-monitor-grace-period", ""}, {"node-startup-grace-period", ""}, {"terminated-pod-gc-threshold", ""},
	{"root-ca-file", ""}, {"service-account-private-key-file", ""},
	{"cluster-signing-cert-file", ""}, {"cluster-signing-key-file", ""}, {"cluster-signing-duration", ""},
}

// notForwarded are the components' flag groups --controller-manager-arg
// and --scheduler-arg do not reach: logging belongs to the process, the
// components reach the apiserver in-process, not through a kubeconfig,
// and the scheduler's leader election follows the shared flags.
var notForwarded = map[string]bool{"logs": true, "misc": true, "leader election": true}

// Server holds the flags of `kubeboot server`: every flag of `kubeboot
// apiserver`, plus kube-controller-manager's and kube-scheduler's with
// their upstream names and defaults, for the two running in the same
// process. Each writes into the component's own options.
type Server struct {
	APIServer
	ControllerManager *cmoptions.KubeControllerManagerOptions
	Scheduler         *schedoptions.Options
	SimulatedNodes    *simulatednodes.Options
	// Node is --node: this host as a node too (hostnode).
	Node *hostnode.Options
	// ClusterDNS is the cluster DNS's flags (clusterdns).
	ClusterDNS *clusterdns.Options
	// Disable is --disable: the pieces a server runs by default that it
	// leaves out (k3s's flag; disableable).
	Disable []string
	// MetricsServer is metrics-server's options (metricsserver).
	MetricsServer *msoptions.Options
	// Gateway is the flags of Gateways and Ingresses (gateway).
	Gateway *gateway.Options
	// DisableHelmController is --disable-helm-controller (k3s's flag):
	// no HelmChart kinds, no controller (helmcontroller).
	DisableHelmController bool
	// DisableCloudController is --disable-cloud-controller (k3s's flag):
	// no cloud node controller (cloudnode), which gives nodes their
	// --node-external-ip.
	DisableCloudController bool
	// ControllerManagerArgs, SchedulerArgs and MetricsServerArgs are
	// --controller-manager-arg, --scheduler-arg and --metrics-server-arg:
	// any other flag of the component, parsed by the component's own flag
	// set.
	ControllerManagerArgs, SchedulerArgs, MetricsServerArgs []string

	controllerManagerFlags, schedulerFlags, metricsServerFlags *pflag.FlagSet
	// controllerManagerFlagSets are all of kube-controller-manager's
	// flags, as its own command has them.
	controllerManagerFlagSets cliflag.NamedFlagSets
}

// sharedLeaderElectionFlags are kube-controller-manager's flags that
// `kubeboot server` applies to kube-scheduler as well.
var sharedLeaderElectionFlags = []string{"leader-elect", "leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"}

// disableable are the pieces --disable leaves out: coredns, the cluster
// DNS (clusterdns), local-storage, the default StorageClass and its
// volumes on the nodes (localstorage), servicelb, LoadBalancer Services
// on the nodes' addresses (servicelb), network-policy, the nodes'
// enforcement of NetworkPolicy (networkpolicy), metrics-server, the
// resource metrics API (metricsserver), gateway-api and ingress, the
// nodes' serving of Gateways and of Ingresses (gateway).
var disableable = []string{"coredns", "local-storage", "servicelb", "network-policy", "metrics-server", "gateway-api", "ingress"}

// NewServer returns the flag defaults.
func NewServer() (*Server, error) {
	cm, err := kubecontrollermanager.NewOptions()
	if err != nil {
		return nil, err
	}
	o := &Server{APIServer: *NewAPIServer(), ControllerManager: cm, Scheduler: kubescheduler.NewOptions(),
		SimulatedNodes: simulatednodes.NewOptions(), Node: hostnode.NewOptions(), ClusterDNS: clusterdns.NewOptions(),
		MetricsServer: metricsserver.NewOptions(), Gateway: gateway.NewOptions()}
	// Nodes join a server's cluster as kubeadm's do, with bootstrap
	// tokens (`kubeboot agent`, --node), so a server authenticates them.
	o.ControlPlane.Authentication.BootstrapToken.Enable = true
	// Their Pods reach each other through flannel's vxlan, as k3s's.
	o.ControlPlane.Nodes.PodNetwork.Backend = nodesettings.VXLAN
	o.controllerManagerFlagSets = kubecontrollermanager.Flags(cm)
	o.controllerManagerFlags = flagSet("kube-controller-manager", o.controllerManagerFlagSets.FlagSets)
	o.schedulerFlags = flagSet("kube-scheduler", o.Scheduler.Flags.FlagSets)
	o.metricsServerFlags = metricsserver.Flags(o.MetricsServer)
	return o, nil
}

// flagSet is one flag set of a component's named flag sets but those in
// notForwarded.
func flagSet(name string, sets map[string]*pflag.FlagSet) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	for group, set := range sets {
		if !notForwarded[group] {
			fs.AddFlagSet(set)
		}
	}
	return fs
}

// AddFlags registers the flags on fs.
func (o *Server) AddFlags(fs *pflag.FlagSet) {
	o.APIServer.AddFlags(fs)
	addFlagsOf(fs, o.controllerManagerFlags, controllerManagerFlags, "kube-controller-manager: ")
	fs.StringVar(&o.Scheduler.ConfigFile, "scheduler-config", o.Scheduler.ConfigFile,
		"kube-scheduler's --config: the path to its configuration file (KubeSchedulerConfiguration).")
	o.SimulatedNodes.AddFlags(fs)
	o.Node.AddFlags(fs)
	nodes := &o.ControlPlane.Nodes
	fs.StringVar(&nodes.ClusterDomain, "cluster-domain", nodes.ClusterDomain,
		"The cluster's DNS domain: Services are <name>.<namespace>.svc.<domain> (the kubelets' clusterDomain).")
	fs.Var(network.AddrsValue{Flag: "--cluster-dns", Addrs: (*[]netip.Addr)(&nodes.ClusterDNS)}, "cluster-dns",
		"The cluster DNS's address, or one of each family separated by a comma: the kube-dns Service's ClusterIPs, which the kubelets give Pods (default: the tenth address of each Service range, 10.96.0.10).")
	o.ClusterDNS.AddFlags(fs)
	fs.StringVar(&nodes.PodNetwork.Backend, "flannel-backend", nodes.PodNetwork.Backend,
		"How the nodes' Pods reach each other (flannel, in each node's process): "+strings.Join(nodesettings.Backends, ", ")+
			"; none leaves the CNI to you. The nodes' pod CIDRs come from --cluster-cidr, one range of each family.")
	fs.BoolVar(&nodes.PodNetwork.IPv6Masq, "flannel-ipv6-masq", nodes.PodNetwork.IPv6Masq,
		"Masquerade the Pods' IPv6 traffic that leaves --cluster-cidr to the node's address, as their IPv4 traffic is (k3s's flag); off: the IPv6 pod range must be routed to the nodes.")
	fs.BoolVar(&nodes.EmbeddedRegistry, "embedded-registry", nodes.EmbeddedRegistry,
		"The nodes serve each other the images their containerd holds, for the registries their registries.yaml lists under mirrors (k3s's flag): "+
			"an image pulled or imported on one node is pulled by the others from it, over TLS with the cluster's certificates, on port "+strconv.Itoa(registrymirror.Port)+".")
	o.Gateway.AddFlags(fs)
	fs.StringSliceVar(&o.Disable, "disable", o.Disable,
		"Pieces the server leaves out (repeatable, or comma-separated): "+strings.Join(disableable, ", ")+
			"; any other NAME leaves alone the manifest NAME (or NAME.yaml, .yml, .json) in <data-dir>/server/manifests, which the server otherwise applies.")
	fs.BoolVar(&o.DisableHelmController, "disable-helm-controller", o.DisableHelmController,
		"Leave out the helm controller, which installs the charts HelmChart objects (helm.cattle.io/v1, k3s's kinds) declare (k3s's flag).")
	fs.BoolVar(&o.DisableCloudController, "disable-cloud-controller", o.DisableCloudController,
		"Leave out the cloud node controller, which gives nodes the external addresses they name (--node-external-ip) and takes their node.cloudprovider.kubernetes.io/uninitialized taint off (k3s's flag): for a cloud controller manager of your own.")
	fs.StringArrayVar(&o.ControllerManagerArgs, "controller-manager-arg", nil,
		"Another kube-controller-manager flag, as --name=value (repeatable), e.g. --controller-manager-arg=--node-monitor-period=2s.")
	fs.StringArrayVar(&o.SchedulerArgs, "scheduler-arg", nil,
		"Another kube-scheduler flag, as --name=value (repeatable), e.g. --scheduler-arg=--pod-max-in-unschedulable-pods-duration=1m.")
	fs.StringArrayVar(&o.MetricsServerArgs, "metrics-server-arg", nil,
		"A metrics-server flag, as --name=value (repeatable): --metric-resolution, its kubelet client's and serving flags, e.g. --metrics-server-arg=--metric-resolution=15s.")
}

// Validate checks the apiserver's flags and parses the components'
// pass-through flags; each problem names its flag. The components' own
// checks run when the configuration is completed.
func (o *Server) Validate() error {
	errs := []error{o.APIServer.Validate(), o.ClusterDNS.Validate(), o.Gateway.Validate()}
	for _, d := range o.Disable {
		// Other names are the manifests directory's files, as k3s takes them.
		if !slices.Contains(disableable, d) && (d == "" || strings.ContainsAny(d, `/\`)) {
			errs = append(errs, fmt.Errorf("--disable %q: neither a piece of the server (%s) nor a manifest's file name", d, strings.Join(disableable, ", ")))
		}
	}
	for _, c := range []struct {
		flag string
		args []string
		fs   *pflag.FlagSet
	}{
		{"--controller-manager-arg", o.ControllerManagerArgs, o.controllerManagerFlags},
		{"--scheduler-arg", o.SchedulerArgs, o.schedulerFlags},
		{"--metrics-server-arg", o.MetricsServerArgs, o.metricsServerFlags},
	} {
		if err := c.fs.Parse(c.args); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.flag, err))
		} else if c.fs.NArg() > 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a flag (want --name=value)", c.flag, c.fs.Args()))
		}
	}
	// The shared leader election flags set on the command line (the
	// command's flag set, o.flags) are set on
	// the scheduler's own, so that they override its --config file as its
	// command line would.
	schedulerElection := o.Scheduler.Flags.FlagSet("leader election")
	for _, name := range sharedLeaderElectionFlags {
		if o.flags != nil && o.flags.Changed(name) {
			if err := schedulerElection.Set(name, o.flags.Lookup(name).Value.String()); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", name, err))
			}
		}
	}
	// The components' feature gates and emulated version, from the flags
	// just parsed (what their binaries do before anything else).
	if err := o.ControllerManager.ComponentGlobalsRegistry.Set(); err != nil {
		errs = append(errs, err)
	}
	o.defaultClusterCIDR()
	ipam, err := o.nodeIPAM()
	errs = append(errs, err)
	errs = append(errs, o.SimulatedNodes.Validate(ipam)...)
	errs = append(errs, o.validateNodeCIDRs(ipam))
	if o.ControlPlane.Nodes.PodNetwork.Enabled() && !o.allocatesNodeCIDRs() {
		errs = append(errs, fmt.Errorf("--flannel-backend %s needs --allocate-node-cidrs: flannel routes each node's pod CIDR (or --flannel-backend=none)",
			o.ControlPlane.Nodes.PodNetwork.Backend))
	}
	errs = append(errs, o.validateNode())
	if err := o.validateFamilies(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateFamilies checks that the Pods' ranges (--cluster-cidr) are of
// the Services' families (--service-cluster-ip-range), the primary first:
// the kubelet and kube-proxy take a node's primary family for the
// cluster's. A range that does not parse is left to its own check.
func (o *Server) validateFamilies() error {
	services, err := network.ParseServiceCIDRs(o.ControlPlane.ServiceClusterIPRange)
	if err != nil || !o.allocatesNodeCIDRs() {
		return nil
	}
	cidr := o.ControllerManager.KubeCloudShared.ClusterCIDR
	pods, err := network.ParsePrefixes("--cluster-cidr", cidr)
	if err != nil {
		return nil
	}
	if got, want := network.Families(pods...), network.Families(services.All()...); !slices.Equal(got, want) {
		given := ""
		if !o.clusterCIDRGiven() {
			given = " (the default)"
		}
		return fmt.Errorf("--cluster-cidr %s%s is %v, but the Services' ranges (--service-cluster-ip-range %s) are %v: the Pods' ranges must be of the Services' families, the primary first",
			cidr, given, got, services, want)
	}
	return nil
}

// defaultClusterCIDR widens node IPAM's range, when --cluster-cidr is
// not given, to --simulated-node-cidr's if the default cannot hold a
// node CIDR for each simulated node: `server --simulated-nodes=5000`
// works as it is, while every server the default holds keeps it (a
// range changed under existing nodes stops kube-controller-manager's
// node IPAM). A --simulated-node-cidr that is no CIDR is left to its
// own check.
func (o *Server) defaultClusterCIDR() {
	if _, err := netip.ParsePrefix(o.SimulatedNodes.PodCIDR); err != nil || o.SimulatedNodes.Count == 0 || o.clusterCIDRGiven() {
		return
	}
	if ipam, err := o.nodeIPAM(); err == nil && ipam != nil && ipam.Holds(o.SimulatedNodes.Count) != nil {
		o.ControllerManager.KubeCloudShared.ClusterCIDR = o.SimulatedNodes.PodCIDR
	}
}

// clusterCIDRFromSimulated reports whether node IPAM's range is
// --simulated-node-cidr's (defaultClusterCIDR).
func (o *Server) clusterCIDRFromSimulated() bool {
	return !o.clusterCIDRGiven() && o.ControllerManager.KubeCloudShared.ClusterCIDR == o.SimulatedNodes.PodCIDR
}

// clusterCIDRGiven reports whether --cluster-cidr was set, on the command
// line or through --controller-manager-arg.
func (o *Server) clusterCIDRGiven() bool {
	const name = "cluster-cidr"
	return (o.flags != nil && o.flags.Changed(name)) || o.controllerManagerFlags.Changed(name)
}

// validateNodeCIDRs checks that, when kube-controller-manager allocates
// the nodes' pod CIDRs, each of its ranges holds one for each simulated
// node; the error names the flag the range came from.
func (o *Server) validateNodeCIDRs(ipam *simulatednodes.NodeIPAM) error {
	if ipam == nil || o.SimulatedNodes.Count == 0 {
		return nil
	}
	err := ipam.Holds(o.SimulatedNodes.Count)
	switch {
	case err == nil:
		return nil
	case o.clusterCIDRFromSimulated():
		return fmt.Errorf("--simulated-node-cidr (node IPAM's range, --cluster-cidr not given): %w: give a larger range", err)
	default:
		return fmt.Errorf("--cluster-cidr: %w: give a larger range, or --allocate-node-cidrs=false for --simulated-node-cidr's", err)
	}
}

// nodeIPAM is kube-controller-manager's node IPAM as the simulated nodes
// need it: its ranges and the node CIDR's prefix length in each
// (--node-cidr-mask-size-ipv4 or -ipv6, else --node-cidr-mask-size, else
// kube-controller-manager's defaults, /24 and /64); nil when it allocates
// no pod CIDRs.
func (o *Server) nodeIPAM() (*simulatednodes.NodeIPAM, error) {
	if !o.allocatesNodeCIDRs() {
		return nil, nil
	}
	ipam := &simulatednodes.NodeIPAM{}
	settings := o.ControllerManager.NodeIPAMController
	cidrs, err := network.ParsePrefixes("--cluster-cidr", o.ControllerManager.KubeCloudShared.ClusterCIDR)
	if err != nil {
		return nil, err
	}
	for _, cidr := range cidrs {
		mask := cmp.Or(int(settings.NodeCIDRMaskSizeIPv4), int(settings.NodeCIDRMaskSize), 24)
		if cidr.Addr().Is6() {
			mask = cmp.Or(int(settings.NodeCIDRMaskSizeIPv6), int(settings.NodeCIDRMaskSize), 64)
		}
		ipam.ClusterCIDRs = append(ipam.ClusterCIDRs, cidr.Masked())
		ipam.MaskSizes = append(ipam.MaskSizes, mask)
	}
	return ipam, nil
}

// allocatesNodeCIDRs reports whether kube-controller-manager allocates
// the nodes' pod CIDRs.
func (o *Server) allocatesNodeCIDRs() bool {
	return kubecontrollermanager.Runs(o.ControllerManager, names.NodeIpamController) && o.ControllerManager.KubeCloudShared.AllocateNodeCIDRs
}

// validateNode checks --node and what it needs of the control plane: the
// kubelet joins with a bootstrap token (so bootstrap token authentication
// is on, as kubeadm has it) and gets its certificate from the controller
// manager's CSR approving and signing controllers.
func (o *Server) validateNode() error {
	if !o.Node.Enabled {
		return o.Node.Validate()
	}
	// --node-ip against the Pods' ranges before the host is looked at
	// (--kubelet-arg=--node-ip is checked when the node starts).
	if o.allocatesNodeCIDRs() {
		for _, f := range []struct {
			flag  string
			addrs []netip.Addr
		}{{"--node-ip", o.Node.NodeIPs}, {"--node-external-ip", o.Node.ExternalIPs}} {
			if err := hostnode.CheckFamilies(f.flag, f.addrs, o.ControllerManager.KubeCloudShared.ClusterCIDR); err != nil {
				return err
			}
		}
		if err := hostnode.CheckHostFamilies(o.ControllerManager.KubeCloudShared.ClusterCIDR); err != nil {
			return err
		}
	}
	if !o.ControlPlane.Authentication.BootstrapToken.Enable {
		return errors.New("--node needs --enable-bootstrap-token-auth: the kubelet joins with a bootstrap token")
	}
	for _, name := range []string{names.CertificateSigningRequestApprovingController, names.CertificateSigningRequestSigningController} {
		if !kubecontrollermanager.Runs(o.ControllerManager, name) {
			return fmt.Errorf("--node needs the %s controller (--controllers): the kubelet gets its certificate through it", name)
		}
	}
	// Last, as it looks at the host.
	return o.Node.Validate()
}

// Config returns the control plane configuration the flags describe:
// the apiserver's, with kube-controller-manager and kube-scheduler in the
// process, and the simulated nodes and this host's node when asked for.
func (o *Server) Config() controlplane.Config {
	c := o.APIServer.Config()
	// The pod network's range is kube-controller-manager's, which gives
	// the nodes their pod CIDRs of it.
	c.Nodes.PodNetwork.ClusterCIDR = o.ControllerManager.KubeCloudShared.ClusterCIDR
	// kube-controller-manager signs the kubelets' certificates;
	// kubeletclient approves a node's first client certificate, for the
	// node its bootstrap token names, and kubeletserving the serving
	// certificates, for each node's own addresses.
	// Simulated nodes carry no zone label: on them upstream's default
	// spreading by zone changes no score, at a cost per Pod that grows with
	// the cluster, so the scheduler spreads by hostname alone
	// (kubescheduler.HostnameSpreading; --scheduler-config overrides it).
	hostnameSpreading := o.SimulatedNodes.Count > 0
	c.Components = append(c.Components, kubecontrollermanager.New(o.ControllerManager, o.controllerManagerFlagSets), kubescheduler.New(o.Scheduler, hostnameSpreading), kubeletserving.New())
	if o.ControlPlane.Authentication.BootstrapToken.Enable {
		// Agents join: the server reaches their Pods and kubelets through
		// the tunnels they open.
		c.Components = append(c.Components, kubeletclient.New(), agenttunnel.New())
	}
	if !slices.Contains(o.Disable, "coredns") {
		c.Components = append(c.Components, clusterdns.New(o.ClusterDNS))
	}
	if !slices.Contains(o.Disable, "local-storage") {
		c.Nodes.LocalStorage = true
		c.Components = append(c.Components, localstorage.New(o.SimulatedNodes.Count > 0))
	}
	if !slices.Contains(o.Disable, "servicelb") {
		c.Components = append(c.Components, servicelb.New())
	}
	if !o.DisableCloudController {
		c.Components = append(c.Components, cloudnode.New())
	}
	if !slices.Contains(o.Disable, "network-policy") {
		c.Nodes.NetworkPolicy = true
		c.Components = append(c.Components, networkpolicy.New())
	}
	if slices.Contains(o.Disable, "metrics-server") {
		c.Components = append(c.Components, metricsserver.Removal{})
	} else {
		c.Components = append(c.Components, metricsserver.New(o.MetricsServer, o.ControllerManager.Generic.LeaderElection))
	}
	gw := *o.Gateway
	gw.Gateway = !slices.Contains(o.Disable, "gateway-api")
	if slices.Contains(o.Disable, "ingress") {
		gw.Ingress = nil
	}
	c.Components = append(c.Components, gateway.New(gw, o.ControllerManager.Generic.LeaderElection), etcdsnapshotfiles.New())
	if !o.DisableHelmController {
		c.Components = append(c.Components, helmcontroller.New(o.ControllerManager.Generic.LeaderElection))
	}
	c.Components = append(c.Components, autodeploy.New(o.Disable))
	if o.SimulatedNodes.Count > 0 {
		// The nodes' pod CIDRs are from the end of kube-controller-manager's
		// ranges when it allocates them (--allocate-node-cidrs), else from
		// --simulated-node-cidr. Validate has parsed the ranges.
		ipam, _ := o.nodeIPAM()
		c.Components = append(c.Components, simulatednodes.New(o.SimulatedNodes, ipam))
	}
	if o.Node.Enabled {
		c.Components = append(c.Components, hostnode.New(o.Node))
	}
	return c
}
