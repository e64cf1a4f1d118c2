package hostnode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/containerruntime"
	"github.com/kubeboot/kubeboot/internal/components/localstorage"
	"github.com/kubeboot/kubeboot/internal/components/networkpolicy"
	"github.com/kubeboot/kubeboot/internal/components/podnetwork"
	"github.com/kubeboot/kubeboot/internal/components/registrymirror"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
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

// Run sets the node up in dir and runs the kubelet, kube-proxy, the pod
// network and, if the cluster has it, local storage until ctx is done or
// one of them fails.
func (o *Options) Run(ctx context.Context, dir string, c Cluster) error {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	bootstrapKubeconfig := filepath.Join(dir, bootstrapKubeconfigName)
	proxyKubeconfig := filepath.Join(dir, proxyKubeconfigName)
	agentKubeconfig := AgentKubeconfig(dir)
	if !Joined(dir, time.Now()) {
		token, err := c.BootstrapToken(ctx)
		if err != nil {
			return err
		}
		if err := writeBootstrapKubeconfig(bootstrapKubeconfig, c.URL, c.CA, token); err != nil {
			return fmt.Errorf("the kubelet's bootstrap kubeconfig: %w", err)
		}
		if err := c.WriteProxyKubeconfig(proxyKubeconfig); err != nil {
			return fmt.Errorf("kube-proxy's kubeconfig: %w", err)
		}
		if err := c.WriteAgentKubeconfig(agentKubeconfig); err != nil {
			return fmt.Errorf("the node agent's kubeconfig: %w", err)
		}
	}
	if err := writeClusterSettings(dir, c.Settings); err != nil {
		return err
	}
	kubeletConfig := filepath.Join(dir, kubeletConfigName)
	if err := writeKubeletConfig(dir, kubeletConfig, c, o.Taints); err != nil {
		return fmt.Errorf("the kubelet's configuration: %w", err)
	}

	agent, err := agentClient(agentKubeconfig)
	if err != nil {
		return err
	}

	runtimeNode := containerruntime.Node{Dir: dir, CNI: c.Settings.PodNetwork.Enabled(), CNIConfDir: filepath.Dir(o.CNIConf)}
	// The node's registry mirror serves the other nodes and asks them
	// (the embedded registry mirror), and pulls from the mirrors that
	// rename repositories, which containerd cannot.
	rewrites, err := o.Runtime.Rewrites()
	if err != nil {
		return err
	}
	mirror := (c.Settings.EmbeddedRegistry || len(rewrites) > 0) && o.Runtime.Embedded()
	if mirror {
		addr, err := o.mirrorAddress()
		if err != nil {
			return fmt.Errorf("the registry mirror's address: %w", err)
		}
		runtimeNode.Mirror = &containerruntime.LocalMirror{URL: registrymirror.URL(addr), Peers: c.Settings.EmbeddedRegistry,
			CAFile: filepath.Join(dir, clientCAName), ClientCertFile: filepath.Join(dir, kubeletCertDirName, kubeletClientCertName)}
	} else if c.Settings.EmbeddedRegistry {
		logger.Info("The cluster has the embedded registry mirror, which this node, on --container-runtime-endpoint, neither serves nor asks")
	}
	// The runtime stops after the kubelet, and before Run returns.
	runtimeCtx, stopRuntime := context.WithCancel(ctx)
	runtime, err := o.Runtime.Start(runtimeCtx, runtimeNode)
	if err != nil {
		stopRuntime()
		return err
	}
	defer func() {
		stopRuntime()
		runtime.Wait()
	}()

	// The node's Pods' NetworkPolicies are in place before the kubelet
	// starts a Pod (its containers survive a restart of the node: the
	// table stays in the kernel meanwhile).
	policyDone := make(chan error, 1)
	if c.Settings.NetworkPolicy && c.Settings.PodNetwork.Enabled() {
		enforcer := networkpolicy.NewEnforcer(networkpolicy.Node{Name: o.nodeName, Client: agent})
		go func() { policyDone <- enforcer.Run(ctx) }()
		select {
		case <-enforcer.Synced():
		case <-time.After(policySyncTimeout):
			logger.Info("The node's NetworkPolicy ruleset is not written yet; starting the kubelet, its Pods are unprotected until it is", "waited", policySyncTimeout)
		case <-ctx.Done():
			return nil
		}
	} else if c.Settings.NetworkPolicy {
		logger.Info("NetworkPolicy is left to the node's CNI (--flannel-backend=none)")
	}

	kubeletCtx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	kubelet, err := o.startKubelet(kubeletCtx, dir, kubeletConfig, bootstrapKubeconfig, runtime.Endpoint)
	if err != nil {
		return err
	}
	logger.Info("Started the kubelet", "pid", kubelet.Process.Pid, "dir", dir, "node", o.nodeName)
	if c.Started != nil {
		go c.Started(kubeletCtx)
	}
	kubeletDone := make(chan error, 1)
	go func() { kubeletDone <- kubelet.Wait() }()
	if mirror {
		go o.runRegistryMirror(kubeletCtx, dir, agent, c.Settings.EmbeddedRegistry, rewrites)
	}
	if c.Settings.LocalStorage {
		go localstorage.RunNode(kubeletCtx, agent, o.nodeName, o.localStoragePath(dir))
	}
	networkDone := make(chan error, 1)
	go func() {
		networkDone <- podnetwork.Run(kubeletCtx, podnetwork.Node{Name: o.nodeName, IP: o.nodeIP, Dir: dir,
			Network: c.Settings.PodNetwork, Kubeconfig: agentKubeconfig, Client: agent, CNIConf: o.CNIConf})
	}()
	// kube-proxy stops only with the process (its informers and servers
	// have no stop), so it is not waited for.
	proxyDone := make(chan error, 1)
	go func() { proxyDone <- o.runProxy(ctx, proxyKubeconfig) }()

	// stopped stops the kubelet when another part of the node has.
	stopped := func(part string, err error) error {
		stopKubelet()
		<-kubeletDone
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: %w", part, err)
	}
	select {
	case err := <-kubeletDone:
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return errKubeletExited
		}
		return fmt.Errorf("%w: %w", errKubeletExited, err)
	case err := <-proxyDone:
		return stopped("kube-proxy", err)
	case err := <-networkDone:
		return stopped("the pod network", err)
	case err := <-policyDone:
		return stopped("NetworkPolicy", err)
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
	if c.Settings.ClusterDNS.IsValid() {
		cfg.ClusterDNS = []string{c.Settings.ClusterDNS.String()}
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// startKubelet starts `kubeboot kubelet` with the node's files and then
// KubeletArgs, which override them. It gets SIGTERM when ctx is done, and
// when this process dies.
func (o *Options) startKubelet(ctx context.Context, dir, config, bootstrapKubeconfig, runtime string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append([]string{kubeletCommand,
		"--config=" + config,
		"--bootstrap-kubeconfig=" + bootstrapKubeconfig,
		"--kubeconfig=" + filepath.Join(dir, kubeletKubeconfigName),
		"--cert-dir=" + filepath.Join(dir, kubeletCertDirName),
		"--container-runtime-endpoint=" + runtime,
	}, o.KubeletArgs...)
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

// runProxy runs kube-proxy, as system:kube-proxy unless --proxy-arg named
// a kubeconfig (a --config file names its own).
func (o *Options) runProxy(ctx context.Context, kubeconfig string) error {
	if !o.proxyFlags.Changed("kubeconfig") {
		if err := o.proxyFlags.Set("kubeconfig", kubeconfig); err != nil {
			return err
		}
	}
	return o.proxy.Run(ctx)
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
func (o *Options) runRegistryMirror(ctx context.Context, dir string, agent kubernetes.Interface, peers bool, rewrites map[string]*containerruntime.Rewrite) {
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
