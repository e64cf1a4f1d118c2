// Package hostnode makes the host a node of the cluster `kubeboot server
// --node` serves, as kubeadm would set it up: upstream's kubelet, run as a
// child process (`kubeboot kubelet`) that gets its client certificate
// through the CSR flow with a bootstrap token, and upstream's kube-proxy in
// the server's process.
//
// The kubelet runs in a process of its own because it is the part most
// likely to fail on a host (no runtime, cgroups) and because it owns
// process-wide state the control plane shares (feature gates, the oom
// score, flags): as a child it fails alone and the server says why.
package hostnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/component-helpers/node/util"
	proxyapp "k8s.io/kubernetes/cmd/kube-proxy/app"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/containerruntime"
	"github.com/kubeboot/kubeboot/internal/components/kubelethost"
	"github.com/kubeboot/kubeboot/internal/components/podnetwork"
	"github.com/kubeboot/kubeboot/internal/platform/network"
	"github.com/kubeboot/kubeboot/internal/platform/registries"
)

// Options are the flags of the host's node.
type Options struct {
	// Enabled is --node: run a kubelet and kube-proxy on this host.
	Enabled bool
	// KubeletArgs is --kubelet-arg: more kubelet flags, after those
	// kubeboot sets (which they override).
	KubeletArgs []string
	// ProxyArgs is --proxy-arg: kube-proxy flags.
	ProxyArgs []string
	// Taints are the taints the node registers with (the kubelet's
	// registerWithTaints).
	Taints []corev1.Taint
	// LocalStoragePath is --default-local-storage-path: where the node's
	// local volumes are made; default <node dir>/storage.
	LocalStoragePath string
	// CNIConf is --flannel-cni-conf: where the node writes the CNI
	// configuration of the pod network, for its runtime.
	CNIConf string
	// Runtime is the node's container runtime: the embedded containerd
	// or --container-runtime-endpoint.
	Runtime *containerruntime.Options
	// NodeIPs is --node-ip: the node's addresses the cluster reaches it
	// at, one of each of the cluster's families (the kubelet's --node-ip);
	// none: the kubelet's choice, the default route's interface's.
	NodeIPs []netip.Addr
	// ExternalIPs is --node-external-ip: the node's addresses outside
	// the cluster's network (k3s's flag), one of each family at most; the
	// Node lists them as ExternalIPs, and ServiceLB gives them to
	// LoadBalancer Services.
	ExternalIPs []netip.Addr

	// enabledBy is the flag that makes this host a node, "" for an agent,
	// which is one anyway.
	enabledBy string
	// nodeName is the name the kubelet registers its Node by, nodeIPs
	// its --node-ip (--kubelet-arg's, else NodeIPs) and nodeIP the first
	// of them (invalid: none given).
	nodeName string
	nodeIPs  []netip.Addr
	nodeIP   netip.Addr
	// proxy holds kube-proxy's options, ProxyArgs parsed by its own flag
	// set, proxyFlags.
	proxy      *proxyapp.Options
	proxyFlags *pflag.FlagSet
}

// NewOptions returns the defaults: no node.
func NewOptions() *Options {
	return &Options{CNIConf: podnetwork.DefaultCNIConf, Runtime: containerruntime.NewOptions()}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "node", o.Enabled,
		"Also run this host as a node: containerd (embedded; needs runc and the CNI plugins) and the kubelet as child processes (cgroup v2), bootstrapping its certificate with a bootstrap token, and kube-proxy in the process. Needs root.")
	o.enabledBy = "--node"
	o.addArgFlags(fs, "With --node, another")
}

// AddAgentFlags registers the flags of a host that is only a node
// (`kubeboot agent`): --kubelet-arg and --proxy-arg; the node is enabled.
func (o *Options) AddAgentFlags(fs *pflag.FlagSet) {
	o.Enabled = true
	o.addArgFlags(fs, "Another")
}

func (o *Options) addArgFlags(fs *pflag.FlagSet, another string) {
	fs.Var(network.AddrsValue{Flag: "--node-ip", Addrs: &o.NodeIPs}, "node-ip",
		"The node's IP address, which the cluster reaches it at, or one of each family for a dual-stack cluster, comma-separated, the primary first (the kubelet's --node-ip). Default: the address of the host's default route.")
	fs.Var(network.AddrsValue{Flag: "--node-external-ip", Addrs: &o.ExternalIPs}, "node-external-ip",
		"The node's external IP address, or one of each family, comma-separated: the Node's ExternalIPs, which LoadBalancer Services get (the servers' cloud node controller sets them; the node waits for it with the node.cloudprovider.kubernetes.io/uninitialized taint).")
	fs.StringArrayVar(&o.KubeletArgs, "kubelet-arg", nil,
		another+" kubelet flag, as --name=value (repeatable), e.g. --kubelet-arg=--max-pods=250.")
	fs.StringArrayVar(&o.ProxyArgs, "proxy-arg", nil,
		another+" kube-proxy flag, as --name=value (repeatable), e.g. --proxy-arg=--proxy-mode=iptables.")
	fs.StringVar(&o.LocalStoragePath, "default-local-storage-path", o.LocalStoragePath,
		"Where the node makes its local-path volumes, a directory each (default: the node's directory's storage).")
	fs.StringVar(&o.CNIConf, "flannel-cni-conf", o.CNIConf,
		"Where the node writes the pod network's CNI configuration, which its container runtime reads.")
	o.Runtime.AddFlags(fs)
}

// NodeName is the name the node registers by (Validate first).
func (o *Options) NodeName() string { return o.nodeName }

// Addresses are the node's addresses its kubelet registers, its
// --node-ip, primary first (Validate first); none: the kubelet's choice.
func (o *Options) Addresses() []netip.Addr { return o.nodeIPs }

// Validate parses the kubelet's and kube-proxy's flags as they do and
// checks that the host can run the kubelet; each problem names its flag.
// Without --node, --kubelet-arg and --proxy-arg are refused.
func (o *Options) Validate() error {
	if !o.Enabled {
		var given []string
		for flag, set := range map[string]bool{"--kubelet-arg": len(o.KubeletArgs) > 0, "--proxy-arg": len(o.ProxyArgs) > 0,
			"--default-local-storage-path": o.LocalStoragePath != "", "--container-runtime-endpoint": o.Runtime.Endpoint != "", "--node-ip": len(o.NodeIPs) > 0, "--node-external-ip": len(o.ExternalIPs) > 0,
			"--pause-image":      o.Runtime.PauseImage != containerruntime.DefaultPauseImage,
			"--snapshotter":      o.Runtime.Snapshotter != containerruntime.NewOptions().Snapshotter,
			"--private-registry": o.Runtime.PrivateRegistry != registries.DefaultPath} {
			if set {
				given = append(given, flag)
			}
		}
		if len(given) > 0 {
			slices.Sort(given)
			return fmt.Errorf("%s: needs --node", strings.Join(given, ", "))
		}
		return nil
	}
	for flag, path := range map[string]string{"--default-local-storage-path": o.LocalStoragePath, "--flannel-cni-conf": o.CNIConf} {
		if path != "" && !filepath.IsAbs(path) {
			return fmt.Errorf("%s %q: not an absolute path", flag, path)
		}
	}
	if err := o.Runtime.Validate(); err != nil {
		return err
	}
	kubelet, err := kubelethost.ParseArgs(o.KubeletArgs)
	if err != nil {
		return fmt.Errorf("--kubelet-arg: %w", err)
	}
	// The runtime has one setting: the node starts the kubelet on it.
	if slices.ContainsFunc(o.KubeletArgs, func(a string) bool { return strings.HasPrefix(a, "--container-runtime-endpoint") }) {
		return errors.New("--kubelet-arg=--container-runtime-endpoint: give --container-runtime-endpoint instead")
	}
	o.proxy = proxyapp.NewOptions()
	o.proxyFlags = pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	o.proxyFlags.SetOutput(io.Discard)
	o.proxy.AddFlags(o.proxyFlags)
	if err := o.proxyFlags.Parse(o.ProxyArgs); err != nil {
		return fmt.Errorf("--proxy-arg: %w", err)
	}
	if o.proxyFlags.NArg() > 0 {
		return fmt.Errorf("--proxy-arg: %q is not a flag (want --name=value)", o.proxyFlags.Args())
	}
	// nftables, kube-proxy's newest mode, where the host has nft (it
	// programs the kernel through it); upstream still defaults to iptables.
	if !o.proxyFlags.Changed("proxy-mode") && o.proxy.ConfigFile == "" {
		mode := "nftables"
		if _, err := exec.LookPath("nft"); err != nil {
			mode = "iptables"
		}
		if err := o.proxyFlags.Set("proxy-mode", mode); err != nil {
			return fmt.Errorf("--proxy-arg=--proxy-mode: %w", err)
		}
	}
	if o.nodeName, err = nodeutil.GetHostname(kubelet.HostnameOverride); err != nil {
		return fmt.Errorf("the node's name: %w", err)
	}
	o.nodeIPs = o.NodeIPs
	if kubelet.NodeIP != "" {
		if o.nodeIPs, err = network.ParseAddrs("--kubelet-arg=--node-ip", kubelet.NodeIP); err != nil {
			return err
		}
	}
	if len(o.nodeIPs) > 0 {
		o.nodeIP = o.nodeIPs[0]
	}
	// kube-proxy finds its Node by the name the kubelet registers.
	if kubelet.HostnameOverride != "" && !o.proxyFlags.Changed("hostname-override") {
		if err := o.proxyFlags.Set("hostname-override", kubelet.HostnameOverride); err != nil {
			return fmt.Errorf("--kubelet-arg=--hostname-override: %w", err)
		}
	}
	// As kube-proxy's command does before it runs: its --config file is
	// read here, and its values checked.
	if err := o.proxy.Complete(o.proxyFlags); err != nil {
		return fmt.Errorf("--proxy-arg: %w", err)
	}
	if err := o.proxy.Validate(); err != nil {
		return fmt.Errorf("--proxy-arg: %w", err)
	}
	if err := o.checkHost(); err != nil {
		if o.enabledBy != "" {
			return fmt.Errorf("%s: %w", o.enabledBy, err)
		}
		return err
	}
	return podnetwork.CheckCNIConf(o.CNIConf)
}

// checkHost checks that the host can run the kubelet: on the runtime at
// --container-runtime-endpoint, or on the embedded containerd, which
// checks what it needs when it starts.
func (o *Options) checkHost() error {
	if o.Runtime.Embedded() {
		return kubelethost.Local.CheckCgroups(o.KubeletArgs)
	}
	return kubelethost.Local.Check(append([]string{"--container-runtime-endpoint=" + o.Runtime.Endpoint}, o.KubeletArgs...))
}

// Component is this host's node (its kubelet and kube-proxy) as a
// component of the server.
type Component struct {
	opts     *Options
	settings controlplane.Settings
}

// New returns the node o describes (Validate first) as a component: it
// reaches the server as any client does, with certificates the cluster
// CA signs.
func New(o *Options) *Component { return &Component{opts: o} }

// Name implements controlplane.Component.
func (c *Component) Name() string { return "node" }

// Complete implements controlplane.Component: the options were
// validated with the command's flags, the host too; the kubelet is given
// the cluster DNS of s.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	c.settings = s
	return controlplane.Needs{}, nil
}

// Run implements controlplane.Component.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	return c.opts.run(ctx, s, c.settings)
}
