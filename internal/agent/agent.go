// Package agent is `kubeboot agent`, k3s's agent on upstream's parts: a
// host that joins a cluster of kubeboot servers as a node, with the
// cluster's token and nothing copied by hand. It checks the server
// against the CA hash the token pins, is admitted under its node name
// (nodejoin: the name is bound to a password only this host keeps), and
// runs the kubelet, which gets its client certificate through the CSR
// flow with the bootstrap token the server issued, and kube-proxy, with a
// certificate the server signed (hostnode runs both, as for `kubeboot
// server --node`). A restart needs no server: the node's credentials are
// in its data dir.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/util/taints"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/hostnode"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// TokenEnv is the environment variable that gives the token when neither
// --token nor --token-file does, k3s's K3S_TOKEN.
const TokenEnv = "KUBEBOOT_TOKEN"

// joinTimeout bounds how long a first start waits for the server to admit
// the node (it asks again while the server is starting).
const joinTimeout = 2 * time.Minute

// Options are the flags of `kubeboot agent`.
type Options struct {
	// Server is --server: the URL of a server of the cluster.
	Server string
	// Token and TokenFile are --token and --token-file: a token that
	// joins agents: the server token (<data-dir>/token), the agent token
	// (<data-dir>/agent-token) or a bootstrap token (kubeboot token
	// create).
	Token, TokenFile string
	// DataDir is --data-dir: the node's files.
	DataDir string
	// NodeName is --node-name; NodeLabels and NodeTaints are --node-label
	// and --node-taint (repeatable): the kubelet's --hostname-override,
	// --node-labels and --register-with-taints. --node-ip is the node's
	// (Node).
	NodeName               string
	NodeLabels, NodeTaints []string
	// BalancerPort is --lb-server-port: where the node's components
	// reach the servers, on 127.0.0.1 (balancer).
	BalancerPort int
	// Node runs the kubelet and kube-proxy (--kubelet-arg, --proxy-arg).
	Node *hostnode.Options

	token clusterjoin.Token
}

// NewOptions returns the defaults: the data dir is agent in the server's
// default data dir.
func NewOptions() *Options {
	return &Options{DataDir: filepath.Join(controlplane.DefaultDataDir(), "agent"), BalancerPort: DefaultBalancerPort, Node: hostnode.NewOptions()}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Server, "server", o.Server, "The URL of a server of the cluster to join, https://<address>:6443.")
	fs.StringVar(&o.Token, "token", o.Token, "A token that joins agents, K10<CA hash>::<credentials>: the server token (token in a server's --data-dir), the agent token (agent-token there) or a bootstrap token (kubeboot token create). Default: $"+TokenEnv+".")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "A file holding the cluster's token (--token).")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for the node's credentials and the kubelet's files.")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "The node's name. Default: the host name.")
	fs.StringArrayVar(&o.NodeLabels, "node-label", nil, "A label the node registers with, key=value (repeatable).")
	fs.StringArrayVar(&o.NodeTaints, "node-taint", nil, "A taint the node registers with, key=value:Effect (repeatable).")
	fs.IntVar(&o.BalancerPort, "lb-server-port", o.BalancerPort,
		"The port on 127.0.0.1 where the kubelet and kube-proxy reach the servers: the agent passes each connection to a server that is up.")
	o.Node.AddAgentFlags(fs)
}

// Validate checks the flags, each problem naming its flag, and that the
// host can run the kubelet.
func (o *Options) Validate() error {
	if o.Server == "" {
		return errors.New("--server is required: the URL of a server of the cluster (https://<address>:6443)")
	}
	if u, err := url.Parse(o.Server); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--server %q is not the https URL of a server (https://<address>:6443)", o.Server)
	}
	if o.Token == "" && o.TokenFile == "" {
		o.Token = os.Getenv(TokenEnv)
	}
	token, err := clusterjoin.TokenArg("token", o.Token, o.TokenFile)
	if err != nil {
		return err
	}
	if token == "" && !hostnode.Joined(o.DataDir, time.Now()) {
		return fmt.Errorf("--token is required to join: --token, --token-file or $%s (the token file in a server's --data-dir)", TokenEnv)
	}
	if token != "" {
		if o.token, err = clusterjoin.ParseToken(token); err != nil {
			return fmt.Errorf("--token: %w", err)
		}
	}
	if o.BalancerPort < 1 || o.BalancerPort > 65535 {
		return fmt.Errorf("--lb-server-port %d is not a port", o.BalancerPort)
	}
	// kubeboot's kubelet flags come first: --kubelet-arg overrides them.
	var kubelet []string
	if o.NodeName != "" {
		kubelet = append(kubelet, "--hostname-override="+o.NodeName)
	}
	if len(o.NodeLabels) > 0 {
		kubelet = append(kubelet, "--node-labels="+strings.Join(o.NodeLabels, ","))
	}
	var removals []corev1.Taint
	if o.Node.Taints, removals, err = taints.ParseTaints(o.NodeTaints); err != nil {
		return fmt.Errorf("--node-taint: %w", err)
	} else if len(removals) > 0 {
		return fmt.Errorf("--node-taint %s: a taint to register is key=value:Effect, not a removal", removals[0].ToString()+"-")
	}
	o.Node.KubeletArgs = append(kubelet, o.Node.KubeletArgs...)
	return o.Node.Validate()
}

// Run joins the cluster, unless the node has joined before, and runs the
// node until ctx is done or the kubelet or kube-proxy fails. A refused
// join writes nothing: joined is called once the data dir may be written
// (the command opens its log file there).
func Run(ctx context.Context, o *Options, joined func() error) error {
	dir := o.DataDir
	if hostnode.Joined(dir, time.Now()) {
		cluster, err := hostnode.JoinedCluster(dir)
		if err != nil {
			return fmt.Errorf("--data-dir %s: %w", dir, err)
		}
		if err := joined(); err != nil {
			return err
		}
		return o.run(ctx, cluster)
	}
	joinCtx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	client, err := clusterjoin.Dial(joinCtx, o.Server, o.token)
	if err != nil {
		return err
	}
	defer client.Close()
	password, stored, err := hostnode.Password(dir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	nodeName := o.Node.NodeName()
	creds, err := client.JoinAgent(joinCtx, nodeName, password)
	if err != nil {
		return err
	}
	if !stored {
		if err := hostnode.StorePassword(dir, password); err != nil {
			return fmt.Errorf("--data-dir %s: %w", dir, err)
		}
	}
	if err := joined(); err != nil {
		return err
	}
	return o.run(ctx, hostnode.Cluster{
		CA:             client.CA,
		Settings:       creds.Settings,
		BootstrapToken: func(context.Context) (string, error) { return creds.BootstrapToken, nil },
		WriteProxyKubeconfig: func(path string) error {
			return o.writeKubeconfig(path, "kube-proxy's certificate", client.CA, creds.ProxyCert, creds.ProxyKey)
		},
		WriteAgentKubeconfig: func(path string) error {
			return o.writeKubeconfig(path, "the node agent's certificate", client.CA, creds.AgentCert, creds.AgentKey)
		},
	})
}

// run runs the node, its components reaching the servers through the
// balancer, which starts from --server and follows the servers.
func (o *Options) run(ctx context.Context, cluster hostnode.Cluster) error {
	u, err := url.Parse(o.Server)
	if err != nil {
		return err
	}
	seed := u.Host
	if u.Port() == "" {
		seed = net.JoinHostPort(u.Hostname(), "443")
	}
	b, err := newBalancer(o.DataDir, o.BalancerPort, seed)
	if err != nil {
		return err
	}
	go b.serve(ctx)
	cluster.URL = balancerURL(o.BalancerPort)
	cluster.Started = func(ctx context.Context) {
		if t, err := newTunnels(hostnode.AgentKubeconfig(o.DataDir), cluster.Settings.PodNetwork.ClusterCIDR); err != nil {
			klog.FromContext(ctx).Error(err, "The node opens no tunnels to the servers: a server not on the pod network cannot reach its Pods")
		} else {
			b.subscribe(func(servers []string) { t.set(ctx, servers) })
		}
		b.follow(ctx, hostnode.ProxyKubeconfig(o.DataDir))
	}
	return o.Node.Run(ctx, o.DataDir, cluster)
}

// writeKubeconfig writes a kubeconfig to path that reaches the servers
// through the balancer, verified against ca, and authenticates with the
// certificate and key the server gave at the join (what, in errors).
func (o *Options) writeKubeconfig(path, what string, ca, certPEM, keyPEM []byte) error {
	certs, err := pki.ParseCertificates(what, certPEM)
	if err != nil {
		return err
	}
	return pki.WriteKubeconfig(path, controlplane.ClusterName, balancerURL(o.BalancerPort), ca,
		&pki.KeyPair{Cert: certs[0], CertPEM: certPEM, KeyPEM: keyPEM})
}

// balancerURL is where the node's components reach the servers.
func balancerURL(port int) string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
