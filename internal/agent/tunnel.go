package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubeboot/kubeboot/internal/platform/tunnel"
)

// Reconnecting to a server backs off from tunnelBackoffMin to
// tunnelBackoffMax; after tunnelBackoffMax without a reconnection (a
// tunnel that lasted) it starts over.
const (
	tunnelBackoffMin = time.Second
	tunnelBackoffMax = 30 * time.Second
)

// tunnels keeps a tunnel open from the node to every server
// (platform/tunnel; agenttunnel takes them): a server reaches the node's
// Pods and kubelet through it, whether or not it is on the pod network.
// The servers are the balancer's.
type tunnels struct {
	tlsConfig *tls.Config
	allow     func(network, addr string) error

	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// newTunnels authenticates with the node agent's kubeconfig and dials,
// for the servers, addresses in clusterCIDR (the Pods') and this host's
// own.
func newTunnels(kubeconfig, clusterCIDR string) (*tunnels, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := rest.TLSConfigFor(config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	var pods []netip.Prefix
	for _, s := range strings.Split(clusterCIDR, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
			pods = append(pods, p.Masked())
		}
	}
	return &tunnels{tlsConfig: tlsConfig, allow: allowed(pods, hostAddrs), running: map[string]context.CancelFunc{}}, nil
}

// set keeps a tunnel to each of servers (host:port) and closes the
// others'; ctx ends them all.
func (t *tunnels) set(ctx context.Context, servers []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := map[string]bool{}
	for _, s := range servers {
		keep[s] = true
		if t.running[s] == nil {
			serverCtx, cancel := context.WithCancel(ctx)
			t.running[s] = cancel
			go t.keep(serverCtx, s)
		}
	}
	for s, cancel := range t.running {
		if !keep[s] {
			cancel()
			delete(t.running, s)
		}
	}
}

// keep connects to server, serves the tunnel while it lasts and
// reconnects, until ctx is done.
func (t *tunnels) keep(ctx context.Context, server string) {
	logger := klog.FromContext(ctx).WithValues("server", server)
	reconnect := wait.Backoff{Duration: tunnelBackoffMin, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: tunnelBackoffMax}
	_ = reconnect.DelayWithReset(clock.RealClock{}, tunnelBackoffMax).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		conn, err := tunnel.Connect(ctx, server, t.tlsConfig)
		if err != nil {
			logger.V(2).Info("No tunnel to the server yet", "err", err)
			return false, nil
		}
		logger.V(2).Info("Opened a tunnel to the server")
		err = tunnel.Serve(ctx, conn, t.allow)
		logger.V(2).Info("The tunnel to the server closed", "err", err)
		return false, nil
	})
}

// allowed is what the node dials for a server: addresses in pods, and
// the host's own (its kubelet, host-network Pods), which hostAddrs lists.
func allowed(pods []netip.Prefix, hostAddrs func() ([]netip.Addr, error)) func(network, addr string) error {
	return func(_, addr string) error {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("%s is not an IP address", host)
		}
		ip = ip.Unmap()
		for _, p := range pods {
			if p.Contains(ip) {
				return nil
			}
		}
		own, err := hostAddrs()
		if err != nil {
			return err
		}
		for _, a := range own {
			if a == ip && !ip.IsLoopback() {
				return nil
			}
		}
		return fmt.Errorf("%s is neither a Pod's nor this node's", ip)
	}
}

// hostAddrs are the addresses of the host's interfaces.
func hostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			ips = append(ips, p.Addr())
		}
	}
	return ips, nil
}
