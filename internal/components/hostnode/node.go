package hostnode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	proxyapp "k8s.io/kubernetes/cmd/kube-proxy/app"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/spf13/pflag"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/cloudnode"
	"github.com/kubeboot/kubeboot/internal/components/containerruntime"
	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
	"github.com/kubeboot/kubeboot/internal/components/localstorage"
	"github.com/kubeboot/kubeboot/internal/components/networkpolicy"
	"github.com/kubeboot/kubeboot/internal/components/podnetwork"
	"github.com/kubeboot/kubeboot/internal/components/registrymirror"
	"github.com/kubeboot/kubeboot/internal/platform/componentflags"
	"github.com/kubeboot/kubeboot/internal/platform/network"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
	"github.com/kubeboot/kubeboot/internal/platform/registries"
)

// policySyncTimeout bounds how long the kubelet waits for the node's
// first NetworkPolicy ruleset (the node's informers' first list).
const policySyncTimeout = 30 * time.Second

// kubeletStopTimeout bounds how long the kubelet may take to exit after
// SIGTERM before it is killed.
const kubeletStopTimeout = 10 * time.Second

// The files of the node, in <data-dir>/node.
const (
	nodeDirName             = "node"
	bootstrapKubeconfigName = "bootstrap-kubelet.kubeconfig"
	kubeletKubeconfigName   = "kubelet.kubeconfig"
	kubeletConfigName       = "kubelet-config.yaml"
	kubeletCertDirName      = "pki"
	proxyKubeconfigName     = "kube-proxy.kubeconfig"
	agentKubeconfigName     = "agent.kubeconfig"
	clusterSettingsName     = "cluster.json"
	clientCAName            = "ca.crt"
)

// kubeletCommand is kubeboot's command that runs the kubelet.
const kubeletCommand = "kubelet"

// errKubeletExited is the error when the kubelet exits on its own.
var errKubeletExited = errors.New("the kubelet exited")

// Cluster is how a node reaches the cluster it is a node of.
type Cluster struct {
	// URL is the apiserver's, CA the cluster CA's PEM.
	URL string
	CA  []byte
	// Settings are what every node of the cluster runs with: the
	// kubelet's clusterDNS and clusterDomain, the pod network it joins
	// (podnetwork), whether it makes local volumes (localstorage), serves
	// and asks the other nodes for images (registrymirror) and enforces
	// its Pods' NetworkPolicies (networkpolicy).
	Settings nodesettings.Settings
	// BootstrapToken returns the kubelet's bootstrap token for its first
	// client certificate; it is called only while the node has not
	// joined (Joined).
	BootstrapToken func(context.Context) (string, error)
	// WriteProxyKubeconfig writes kube-proxy's kubeconfig to path; it is
	// called only while the node has not joined.
	WriteProxyKubeconfig func(path string) error
	// WriteAgentKubeconfig writes the kubeconfig of the node's agent
	// (nodejoin.AgentUser), which its pod network and local storage act
	// as, to path; it is called only while the node has not joined.
	WriteAgentKubeconfig func(path string) error
	// Started, if set, is called once the kubelet has started, with a
	// context that ends when it stops.
	Started func(context.Context)
}

// Dir is the directory of the node of a server (--node) whose data dir is
// dataDir.
func Dir(dataDir string) string { return filepath.Join(dataDir, nodeDirName) }

// Run sets the node up in dir and runs it until ctx is done or one of its
// parts fails, in this order:
//
//  1. writeFiles: on its first join, the kubelet's bootstrap kubeconfig
//     and kube-proxy's and the node agent's kubeconfigs; at every start,
//     the cluster's settings (cluster.json) and the kubelet's
//     configuration;
//  2. startRuntime: the container runtime, the embedded containerd as a
//     child process (its registry mirror first among its endpoints when
//     the node has one) or the host's at --container-runtime-endpoint;
//  3. startNetworkPolicy: the enforcer of the node's Pods'
//     NetworkPolicies (networkpolicy), waited for until its first ruleset
//     is in the kernel;
//  4. startKubelet: the kubelet, a child process;
//  5. startBesideKubelet: the registry mirror (registrymirror), local
//     storage's provisioner (localstorage), the pod network (podnetwork:
//     flannel and the CNI configuration), the cluster's Gateways and
//     Ingresses on the node's ports (gateway's dataplane) and kube-proxy,
//     in the process.
//
// On the way out the kubelet stops first, then the runtime.
func (o *Options) Run(ctx context.Context, dir string, c Cluster) error {
	n := &node{Options: o, dir: dir, cluster: c}
	if err := o.checkFamilies(c.Settings.PodNetwork.ClusterCIDR); err != nil {
		return err
	}
	if err := n.writeFiles(ctx); err != nil {
		return err
	}
	var err error
	if n.agent, err = agentClient(AgentKubeconfig(dir)); err != nil {
		return err
	}
	if n.rewrites, err = o.Runtime.Rewrites(); err != nil {
		return err
	}

	// The runtime stops after the kubelet, and before Run returns.
	runtimeCtx, stopRuntime := context.WithCancel(ctx)
	runtime, err := n.startRuntime(runtimeCtx)
	if err != nil {
		stopRuntime()
		return err
	}
	defer func() {
		stopRuntime()
		runtime.Wait()
	}()

	parts := make(chan partExit, 3)
	if !n.startNetworkPolicy(ctx, parts) {
		return nil
	}
	kubeletCtx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	kubeletDone, err := n.startKubelet(kubeletCtx, runtime.Endpoint)
	if err != nil {
		return err
	}
	n.startBesideKubelet(ctx, kubeletCtx, parts)
	return n.wait(ctx, stopKubelet, kubeletDone, parts)
}

// node is a node being run: Options.Run's steps share it.
type node struct {
	*Options
	dir     string
	cluster Cluster
	// agent is a client of the node's agent (nodejoin.AgentUser).
	agent kubernetes.Interface
	// rewrites are registries.yaml's registries whose mirrors rename
	// repositories, which the registry mirror pulls for containerd.
	rewrites map[string]*registries.Rewrite
	// mirror is whether the node runs its registry mirror.
	mirror bool
}

// partExit is a part of the node that returned, and its error.
type partExit struct {
	part string
	err  error
}

// writeFiles writes the node's files: its credentials on its first join,
// and the cluster's settings and the kubelet's configuration at every
// start.
func (n *node) writeFiles(ctx context.Context) error {
	c := n.cluster
	if !Joined(n.dir, time.Now()) {
		token, err := c.BootstrapToken(ctx)
		if err != nil {
			return err
		}
		if err := writeBootstrapKubeconfig(filepath.Join(n.dir, bootstrapKubeconfigName), c.URL, c.CA, token); err != nil {
			return fmt.Errorf("the kubelet's bootstrap kubeconfig: %w", err)
		}
		if err := c.WriteProxyKubeconfig(ProxyKubeconfig(n.dir)); err != nil {
			return fmt.Errorf("kube-proxy's kubeconfig: %w", err)
		}
		if err := c.WriteAgentKubeconfig(AgentKubeconfig(n.dir)); err != nil {
			return fmt.Errorf("the node agent's kubeconfig: %w", err)
		}
	}
	if err := writeClusterSettings(n.dir, c.Settings); err != nil {
		return err
	}
	if err := writeKubeletConfig(n.dir, filepath.Join(n.dir, kubeletConfigName), c, n.Taints); err != nil {
		return fmt.Errorf("the kubelet's configuration: %w", err)
	}
	return nil
}

// startRuntime starts the node's container runtime. The node's registry
// mirror serves the other nodes and asks them (the embedded registry
// mirror), and pulls from the mirrors that rename repositories, which
// containerd cannot; containerd asks it first.
func (n *node) startRuntime(ctx context.Context) (*containerruntime.Runtime, error) {
	settings := n.cluster.Settings
	spec := containerruntime.Node{Dir: n.dir, CNI: settings.PodNetwork.Enabled(), CNIConfDir: filepath.Dir(n.CNIConf)}
	n.mirror = (settings.EmbeddedRegistry || len(n.rewrites) > 0) && n.Runtime.Embedded()
	if n.mirror {
		addr, err := n.mirrorAddress()
		if err != nil {
			return nil, fmt.Errorf("the registry mirror's address: %w", err)
		}
		spec.Mirror = &registries.LocalMirror{URL: registrymirror.URL(addr), Peers: settings.EmbeddedRegistry,
			CAFile: filepath.Join(n.dir, clientCAName), ClientCertFile: filepath.Join(n.dir, kubeletCertDirName, kubeletClientCertName)}
	} else if settings.EmbeddedRegistry {
		klog.FromContext(ctx).Info("The cluster has the embedded registry mirror, which this node, on --container-runtime-endpoint, neither serves nor asks")
	}
	return n.Runtime.Start(ctx, spec)
}

// startNetworkPolicy starts the node's NetworkPolicy enforcer, when the
// cluster has it on kubeboot's pod network, and waits until the node's
// Pods' policies are in place, before the kubelet starts a Pod (their
// containers survive a restart of the node: the table stays in the kernel
// meanwhile); it reports false if ctx ended meanwhile. The enforcer's end
// is sent to parts.
func (n *node) startNetworkPolicy(ctx context.Context, parts chan<- partExit) bool {
	logger := klog.FromContext(ctx)
	settings := n.cluster.Settings
	if !settings.NetworkPolicy {
		return true
	}
	if !settings.PodNetwork.Enabled() {
		logger.Info("NetworkPolicy is left to the node's CNI (--flannel-backend=none)")
		return true
	}
	enforcer := networkpolicy.NewEnforcer(networkpolicy.Node{Name: n.nodeName, Client: n.agent})
	go func() { parts <- partExit{"NetworkPolicy", enforcer.Run(ctx)} }()
	select {
	case <-enforcer.Synced():
	case <-time.After(policySyncTimeout):
		logger.Info("The node's NetworkPolicy ruleset is not written yet; starting the kubelet, its Pods are unprotected until it is", "waited", policySyncTimeout)
	case <-ctx.Done():
		return false
	}
	return true
}

// startKubelet starts the kubelet on the runtime at endpoint; its exit is
// sent on the channel returned.
func (n *node) startKubelet(ctx context.Context, endpoint string) (<-chan error, error) {
	kubelet, err := n.execKubelet(ctx, n.dir, filepath.Join(n.dir, kubeletConfigName), filepath.Join(n.dir, bootstrapKubeconfigName), endpoint)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Started the kubelet", "pid", kubelet.Process.Pid, "dir", n.dir, "node", n.nodeName)
	if n.cluster.Started != nil {
		go n.cluster.Started(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- kubelet.Wait() }()
	return done, nil
}

// startBesideKubelet starts the parts of the node that run beside the
// kubelet: the registry mirror, local storage and the Gateways' and
// Ingresses' data plane until kubeletCtx is done, whose failures are
// logged, not the node's; the pod network until
// kubeletCtx is done and kube-proxy until ctx is (it has no stop: it ends
// with the process), whose ends are sent to parts.
func (n *node) startBesideKubelet(ctx, kubeletCtx context.Context, parts chan<- partExit) {
	settings := n.cluster.Settings
	if n.mirror {
		go n.runRegistryMirror(kubeletCtx, n.dir, n.agent, settings.EmbeddedRegistry, n.rewrites)
	}
	if settings.LocalStorage {
		go localstorage.RunNode(kubeletCtx, n.agent, n.nodeName, n.localStoragePath(n.dir))
	}
	// The servers' cloud node controller gives the Node its external
	// addresses once its agent names them (and none once it names none).
	go func() {
		if err := cloudnode.PublishExternalIPs(kubeletCtx, n.agent, n.nodeName, n.ExternalIPs); err != nil && kubeletCtx.Err() == nil {
			klog.FromContext(ctx).Error(err, "The node's external addresses are not published")
		}
	}()
	// The server publishes what the node serves, if anything: until then
	// it holds one watch. Its failure is logged, not the node's.
	go func() {
		if err := dataplane.Run(kubeletCtx, dataplane.Node{Name: n.nodeName, Client: n.agent}); err != nil && kubeletCtx.Err() == nil {
			klog.FromContext(ctx).Error(err, "The node stopped serving the cluster's Gateways and Ingresses")
		}
	}()
	go func() {
		parts <- partExit{"the pod network", podnetwork.Run(kubeletCtx, podnetwork.Node{Name: n.nodeName, IPs: n.nodeIPs, Dir: n.dir,
			Network: settings.PodNetwork, Kubeconfig: AgentKubeconfig(n.dir), Client: n.agent, CNIConf: n.CNIConf})}
	}()
	go func() { parts <- partExit{"kube-proxy", n.runProxy(ctx, n.dir)} }()
}

// wait waits until ctx is done, the kubelet exits or another part of the
// node returns, which stops the kubelet.
func (n *node) wait(ctx context.Context, stopKubelet func(), kubeletDone <-chan error, parts <-chan partExit) error {
	select {
	case err := <-kubeletDone:
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return errKubeletExited
		}
		return fmt.Errorf("%w: %w", errKubeletExited, err)
	case p := <-parts:
		stopKubelet()
		<-kubeletDone
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: %w", p.part, p.err)
	case <-ctx.Done():
		<-kubeletDone
		return nil
	}
}

// run runs the server's host as a node: its password and bootstrap token
// come from the server in the process, kube-proxy's certificate from the
// server's CA, and its Node is tied to the server's etcd member.
func (o *Options) run(ctx context.Context, s *controlplane.Server, settings controlplane.Settings) error {
	dir := Dir(s.DataDir())
	admin := s.AdminConfig()
	return o.Run(ctx, dir, Cluster{
		URL:      s.URL(),
		CA:       admin.CAData,
		Settings: settings.Nodes,
		BootstrapToken: func(ctx context.Context) (string, error) {
			password, stored, err := Password(dir)
			if err != nil {
				return "", err
			}
			client, err := kubernetes.NewForConfig(admin)
			if err != nil {
				return "", err
			}
			token, err := nodejoin.Admit(ctx, client, o.nodeName, password)
			if err != nil {
				return "", fmt.Errorf("node %s: %w", o.nodeName, err)
			}
			if !stored {
				err = StorePassword(dir, password)
			}
			return token, err
		},
		WriteProxyKubeconfig: func(path string) error { return s.WriteUserKubeconfig(path, user.KubeProxy, nil) },
		WriteAgentKubeconfig: func(path string) error {
			kp, err := s.AgentCertificate(o.nodeName)
			if err != nil {
				return err
			}
			return s.WriteKubeconfig(path, kp)
		},
		Started: func(ctx context.Context) {
			if err := s.TieNode(ctx, o.nodeName); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "Marking the Node as this server's: deleting it will not remove the server's etcd member", "node", o.nodeName)
			}
		},
	})
}

// writeKubeletConfig writes the kubelet's configuration file, as kubeadm
// does: requests to its port are authenticated by client certificate
// (signed by the cluster CA, written to dir) or by the apiserver's
// TokenReview, never anonymous, and authorized by SubjectAccessReview;
// its client certificate is renewed through the CSR flow.
func writeKubeletConfig(dir, path string, c Cluster, taints []corev1.Taint) error {
	caFile := filepath.Join(dir, clientCAName)
	if err := os.WriteFile(caFile, c.CA, 0o600); err != nil {
		return err
	}
	cfg := kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletconfigv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		Authentication: kubeletconfigv1beta1.KubeletAuthentication{
			X509:      kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: caFile},
			Webhook:   kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:      kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
		RotateCertificates: true,
		// Its serving certificate comes from the cluster CA through a CSR
		// (kubeletserving approves it for the node's own addresses), so
		// the API server can verify whom it reaches.
		ServerTLSBootstrap: true,
		RegisterWithTaints: taints,
		// Pods resolve names through the cluster DNS (clusterdns).
		ClusterDomain: c.Settings.ClusterDomain,
	}
	if len(c.Settings.ClusterDNS) > 0 {
		cfg.ClusterDNS = c.Settings.ClusterDNS.Strings()
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// execKubelet starts `kubeboot kubelet` with the node's files and then
// KubeletArgs, which override them. It gets SIGTERM when ctx is done, and
// when this process dies.
func (o *Options) execKubelet(ctx context.Context, dir, config, bootstrapKubeconfig, runtime string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	nodeIPArgs, err := o.nodeIPArgs()
	if err != nil {
		return nil, err
	}
	args := append([]string{kubeletCommand,
		"--config=" + config,
		"--bootstrap-kubeconfig=" + bootstrapKubeconfig,
		"--kubeconfig=" + filepath.Join(dir, kubeletKubeconfigName),
		"--cert-dir=" + filepath.Join(dir, kubeletCertDirName),
		"--container-runtime-endpoint=" + runtime,
	}, nodeIPArgs...)
	args = append(args, o.KubeletArgs...)
	if err := componentflags.Publish(componentflags.Dir(dir), kubeletCommand, args[1:]); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	// Not the user's working directory: the kubelet cleans a container's
	// logs up by globbing its log path, which a runtime that reports none
	// turns into "*" in the working directory.
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = kubeletStopTimeout
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the kubelet: %w", err)
	}
	return cmd, nil
}

// runProxy runs kube-proxy with the node's files in dir, as
// system:kube-proxy unless --proxy-arg named a kubeconfig (a --config
// file names its own), and publishes its settings (componentflags).
func (o *Options) runProxy(ctx context.Context, dir string) error {
	if !o.proxyFlags.Changed("kubeconfig") {
		if err := o.proxyFlags.Set("kubeconfig", ProxyKubeconfig(dir)); err != nil {
			return err
		}
	}
	if err := componentflags.Publish(componentflags.Dir(dir), "kube-proxy", componentflags.Args(proxyDefaults(), o.proxyFlags)); err != nil {
		return err
	}
	return o.proxy.Run(ctx)
}

// proxyDefaults is kube-proxy's flags as its binary registers them.
func proxyDefaults() []*pflag.FlagSet {
	fs := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	proxyapp.NewOptions().AddFlags(fs)
	return []*pflag.FlagSet{fs}
}

// agentClient is a client of the node's agent.
func agentClient(kubeconfig string) (kubernetes.Interface, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the node agent's kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(config)
}

// localStoragePath is where the node makes its local volumes.
func (o *Options) localStoragePath(dir string) string {
	if o.LocalStoragePath != "" {
		return o.LocalStoragePath
	}
	return filepath.Join(dir, localstorage.DirName)
}

// runRegistryMirror serves the node's registry mirror until ctx is done:
// to the other nodes with peers, and for the registries in rewrites. A
// mirror that cannot serve leaves the node pulling from the registries
// (its containerd goes on to the next endpoint), so its failure is
// logged, not the node's.
func (o *Options) runRegistryMirror(ctx context.Context, dir string, agent kubernetes.Interface, peers bool, rewrites map[string]*registries.Rewrite) {
	logger := klog.FromContext(ctx)
	store, closeStore, err := registrymirror.NewContainerdStore(containerruntime.Socket(dir), containerruntime.CRINamespace)
	if err == nil {
		defer closeStore()
		err = registrymirror.Run(ctx, registrymirror.Config{
			NodeName: o.nodeName, Peers: peers, Registries: o.Runtime.Mirrored(), Rewrites: rewrites,
			CAFile: filepath.Join(dir, clientCAName), CertDir: filepath.Join(dir, kubeletCertDirName),
			Store: store, Client: agent,
		})
	}
	if err != nil && ctx.Err() == nil {
		logger.Error(err, "The registry mirror stopped: this node pulls from the registries, and serves the others nothing")
	}
}

// CheckFamilies checks that each of a node's addresses (flag's:
// --node-ip, --node-external-ip) is of a family of the cluster's pod
// ranges (clusterCIDR, kube-controller-manager's --cluster-cidr; "" or not
// a range: any): an agent learns them at its join.
func CheckFamilies(flag string, addrs []netip.Addr, clusterCIDR string) error {
	if clusterCIDR == "" {
		return nil
	}
	pods, err := network.ParsePrefixes("--cluster-cidr", clusterCIDR)
	if err != nil {
		// Checked where it is given.
		return nil
	}
	families := network.Families(pods...)
	for _, ip := range addrs {
		if !slices.Contains(families, network.FamilyOf(ip)) {
			return fmt.Errorf("%s %s: the cluster has no %s ranges (its Pods' are %s)", flag, ip, network.FamilyOf(ip), clusterCIDR)
		}
	}
	return nil
}

// checkFamilies checks the node's addresses, --node-ip's (or
// --kubelet-arg's) and --node-external-ip's, against the cluster's
// families (CheckFamilies), and that the host carries IPv6 if the cluster
// has it (CheckHostFamilies).
func (o *Options) checkFamilies(clusterCIDR string) error {
	if err := CheckFamilies("--node-ip", o.nodeIPs, clusterCIDR); err != nil {
		return err
	}
	if err := CheckFamilies("--node-external-ip", o.ExternalIPs, clusterCIDR); err != nil {
		return err
	}
	return CheckHostFamilies(clusterCIDR)
}

// CheckHostFamilies checks that this host can carry the families of the
// cluster's pod ranges (clusterCIDR; "" or not a range: nothing to check):
// a host without IPv6 cannot be a node of a cluster with an IPv6 range.
func CheckHostFamilies(clusterCIDR string) error {
	pods, err := network.ParsePrefixes("--cluster-cidr", clusterCIDR)
	if clusterCIDR == "" || err != nil || !slices.Contains(network.Families(pods...), network.IPv6) {
		return nil
	}
	if err := network.HostIPv6("/proc"); err != nil {
		return fmt.Errorf("the cluster's pod ranges (--cluster-cidr %s) have an IPv6 one, but %w", clusterCIDR, err)
	}
	return nil
}

// nodeIPArgs is --node-ip as the kubelet's flag, before --kubelet-arg,
// which overrides it. A node with external addresses has them set by the
// servers' cloud node controller (cloudnode), as an external cloud
// provider's: the kubelet is told so, and given the node's address,
// which it publishes for the controller to keep (the default route's
// when --node-ip names none).
func (o *Options) nodeIPArgs() ([]string, error) {
	var args []string
	nodeIPs := o.NodeIPs
	if len(o.ExternalIPs) > 0 {
		args = append(args, "--cloud-provider=external")
		if len(nodeIPs) == 0 {
			addr, err := o.mirrorAddress()
			if err != nil {
				return nil, fmt.Errorf("the node's address, for --node-external-ip: %w", err)
			}
			nodeIPs = []netip.Addr{addr}
		}
	}
	if len(nodeIPs) > 0 {
		args = append(args, "--node-ip="+network.AddrsValue{Addrs: &nodeIPs}.String())
	}
	return args, nil
}

// mirrorAddress is where the node's containerd reaches its own registry
// mirror: --node-ip, else the address the kubelet chooses without it
// (the default route's interface's).
func (o *Options) mirrorAddress() (netip.Addr, error) {
	if o.nodeIP.IsValid() {
		return o.nodeIP, nil
	}
	ip, err := utilnet.ResolveBindAddress(nil)
	if err != nil {
		return netip.Addr{}, err
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap(), nil
}
