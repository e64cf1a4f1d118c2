// Package agenttunnel is the server's way into the cluster's network
// through its agents, as k3s's egress selector in pod mode: each agent
// opens a tunnel to every server (platform/tunnel), authenticated by the
// node agent's client certificate, and the API server's connections to
// the cluster (kube-apiserver's egress "cluster": admission and
// conversion webhooks, aggregated API servers, the pods, services and
// nodes proxy subresources, logs, exec and port-forward) go through the
// tunnel of the node whose pod CIDRs or addresses hold the destination.
// Any other destination, or a node without a tunnel (the server's own,
// simulated nodes), is dialed directly. A server that is not a node, and
// so not on the pod network, reaches Pods on its agents this way.
package agenttunnel

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/tunnel"
)

// User is the user the component reads Nodes as.
const User = "system:kubeboot:agent-tunnels"

// directDialer dials what no tunnel carries, as net/http's default
// transport does.
var directDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// Component takes the agents' tunnels and dials through them.
type Component struct {
	sessions tunnel.Sessions
	caFile   string
	// auth verifies an agent's client certificate against the cluster
	// CA, read at the first tunnel (the CA is written after Complete).
	authMu sync.Mutex
	auth   authenticator.Request
	// firstTunnel is closed once a tunnel is up: the Nodes are watched
	// from then on, so that a server no agent joins keeps no copies.
	firstTunnel     chan struct{}
	firstTunnelOnce sync.Once
	// nodes is the Nodes' lister once synced; nil: every destination is
	// dialed directly.
	nodes atomic.Pointer[corelisters.NodeLister]
}

// New returns the component.
func New() *Component {
	return &Component{firstTunnel: make(chan struct{})}
}

// Name implements controlplane.Component.
func (*Component) Name() string { return "agent tunnels" }

// Complete implements controlplane.Component: the component serves
// tunnel.Path before authentication (it verifies the agents' certificates
// itself), is the API server's egress to the cluster, and reads Nodes as
// User.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	c.caFile = s.CAFile
	return controlplane.Needs{
		User: User,
		Grant: controlplane.GrantClusterRole("system:kubeboot:agent-tunnels", User,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}),
		Allowed:       authorizationv1.ResourceAttributes{Verb: "watch", Resource: "nodes"},
		SharedObjects: true,
		Egress:        c.Dial,
		Endpoints:     map[string]http.Handler{tunnel.Path: c},
	}, nil
}

// Run implements controlplane.Component: once a tunnel is up, it watches
// the Nodes, to route by their pod CIDRs and addresses; at the end it
// closes the tunnels.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	defer c.sessions.Close()
	select {
	case <-ctx.Done():
		return nil
	case <-c.firstTunnel:
	}
	client, err := s.Client(User)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(s.SharedObjects().Transform))
	lister := factory.Core().V1().Nodes().Lister()
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), factory.Core().V1().Nodes().Informer().HasSynced) {
		return nil
	}
	c.nodes.Store(&lister)
	<-ctx.Done()
	return nil
}

// ServeHTTP takes a tunnel from a node's agent (nodejoin.AgentUser), as
// that node's.
func (c *Component) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth, err := c.authenticator()
	if err != nil {
		klog.FromContext(r.Context()).Error(err, "Agent tunnels cannot be authenticated")
		http.Error(w, "the server cannot authenticate agents yet", http.StatusServiceUnavailable)
		return
	}
	resp, ok, err := auth.AuthenticateRequest(r)
	if err != nil || !ok {
		http.Error(w, "a tunnel needs a node agent's client certificate", http.StatusUnauthorized)
		return
	}
	node, isAgent := nodejoin.AgentNode(resp.User.GetName())
	if !isAgent || !slices.Contains(resp.User.GetGroups(), nodejoin.AgentsGroup) {
		http.Error(w, fmt.Sprintf("user %q is not a node's agent", resp.User.GetName()), http.StatusForbidden)
		return
	}
	c.sessions.Accept(w, r, node)
	klog.FromContext(r.Context()).V(2).Info("A node's agent opened a tunnel", "node", node, "from", r.RemoteAddr)
	c.firstTunnelOnce.Do(func() { close(c.firstTunnel) })
}

// authenticator verifies client certificates against the cluster CA,
// read once it can be.
func (c *Component) authenticator() (authenticator.Request, error) {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if c.auth != nil {
		return c.auth, nil
	}
	data, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, err
	}
	certs, err := pki.ParseCertificates(c.caFile, data)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	for _, cert := range certs {
		roots.AddCert(cert)
	}
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = roots
	c.auth = x509request.New(opts, x509request.CommonNameUserConversion)
	return c.auth, nil
}

// Dial connects to addr, through the tunnel of the node that holds its
// address if that node has one, else directly: the API server's egress
// to the cluster.
func (c *Component) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if node, ok := c.nodeOf(addr); ok {
		return c.sessions.Dial(ctx, node, network, addr)
	}
	return directDialer.DialContext(ctx, network, addr)
}

// nodeOf is the node with a tunnel whose pod CIDRs or addresses hold
// addr's IP.
func (c *Component) nodeOf(addr string) (string, bool) {
	lister := c.nodes.Load()
	if lister == nil {
		return "", false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", false
	}
	for _, name := range c.sessions.Nodes() {
		if node, err := (*lister).Get(name); err == nil && holds(node, ip) {
			return name, true
		}
	}
	return "", false
}

// holds reports whether ip is in node's pod CIDRs or one of its
// addresses.
func holds(node *corev1.Node, ip netip.Addr) bool {
	for _, cidr := range node.Spec.PodCIDRs {
		if p, err := netip.ParsePrefix(cidr); err == nil && p.Contains(ip) {
			return true
		}
	}
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeHostName && a.Type != corev1.NodeInternalDNS && a.Type != corev1.NodeExternalDNS {
			if got, err := netip.ParseAddr(a.Address); err == nil && got == ip {
				return true
			}
		}
	}
	return false
}
