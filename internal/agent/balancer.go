package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

const (
	// DefaultBalancerPort is where the agent's balancer listens on
	// 127.0.0.1, k3s's --lb-server-port.
	DefaultBalancerPort = 6444
	// serversFileName keeps the servers the balancer knows, one
	// host:port a line, for a restart without any of them named.
	serversFileName = "servers"
	// dialTimeout bounds a connection to one server before the next is
	// tried.
	dialTimeout = 2 * time.Second
	// refreshInterval is how often the balancer learns the servers from
	// the kubernetes Service's endpoints.
	refreshInterval = 15 * time.Second
)

// balancer is the agent's way to the servers, k3s's client load
// balancer: the kubelet and kube-proxy reach https://127.0.0.1:<port>,
// and each connection is passed to a server that accepts it, the one
// that last did first. The servers are the kubernetes Service's
// endpoints, learnt as they change, so a node whose server goes keeps
// working through another (the servers' certificates name 127.0.0.1).
type balancer struct {
	listener net.Listener
	file     string

	mu       sync.Mutex
	servers  []string // host:port, the preferred first
	onChange func([]string)
}

// newBalancer listens on 127.0.0.1:port for the servers in dir's file,
// or seed if it has none yet.
func newBalancer(dir string, port int, seed string) (*balancer, error) {
	b := &balancer{file: filepath.Join(dir, serversFileName)}
	if data, err := os.ReadFile(b.file); err == nil {
		b.servers = strings.Fields(string(data))
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if len(b.servers) == 0 {
		b.servers = []string{seed}
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("the servers' balancer (--lb-server-port): %w", err)
	}
	b.listener = l
	return b, nil
}

// serve passes connections on until ctx is done.
func (b *balancer) serve(ctx context.Context) {
	go func() {
		<-ctx.Done()
		b.listener.Close()
	}()
	for {
		conn, err := b.listener.Accept()
		if err != nil {
			return
		}
		go b.pass(ctx, conn)
	}
}

// pass connects conn to the first server that accepts, and copies both
// ways until either side closes.
func (b *balancer) pass(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	b.mu.Lock()
	servers := slices.Clone(b.servers)
	b.mu.Unlock()
	var upstream net.Conn
	for _, s := range servers {
		c, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "tcp", s)
		if err == nil {
			upstream = c
			b.prefer(s)
			break
		}
		klog.FromContext(ctx).V(2).Info("A server refused the node's connection; trying the next", "server", s, "err", err)
	}
	if upstream == nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	for _, p := range [][2]net.Conn{{upstream, conn}, {conn, upstream}} {
		go func() {
			_, _ = io.Copy(p[0], p[1])
			if tc, ok := p[0].(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
}

// prefer makes s the first server tried.
func (b *balancer) prefer(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.servers, s); i > 0 {
		b.servers = append([]string{s}, slices.Delete(b.servers, i, i+1)...)
	}
}

// setServers replaces the servers by those listed, keeping the preferred
// first if it is still one, and keeps them in the file.
func (b *balancer) setServers(listed []string) error {
	if len(listed) == 0 {
		return nil
	}
	slices.Sort(listed)
	b.mu.Lock()
	if first := b.servers[0]; slices.Contains(listed, first) {
		listed = append([]string{first}, slices.DeleteFunc(listed, func(s string) bool { return s == first })...)
	}
	changed := !slices.Equal(b.servers, listed)
	b.servers = listed
	onChange := b.onChange
	b.mu.Unlock()
	if !changed {
		return nil
	}
	if onChange != nil {
		onChange(slices.Clone(listed))
	}
	return pki.WriteFile(b.file, []byte(strings.Join(listed, "\n")+"\n"), 0o600)
}

// subscribe calls onChange with the servers now and whenever they
// change.
func (b *balancer) subscribe(onChange func([]string)) {
	b.mu.Lock()
	b.onChange = onChange
	servers := slices.Clone(b.servers)
	b.mu.Unlock()
	onChange(servers)
}

// follow learns the servers from the kubernetes Service's endpoints with
// the credentials of kubeconfig (kube-proxy's, which may read them) until
// ctx is done.
func (b *balancer) follow(ctx context.Context, kubeconfig string) {
	logger := klog.FromContext(ctx)
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		logger.Error(err, "The servers' balancer cannot learn the servers")
		return
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		logger.Error(err, "The servers' balancer cannot learn the servers")
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if servers, err := listServers(ctx, client); err != nil {
			logger.V(2).Info("Listing the servers", "err", err)
		} else if err := b.setServers(servers); err != nil {
			logger.Error(err, "Keeping the servers' list")
		}
	}, refreshInterval)
}

// listServers are the kubernetes Service's ready endpoints, host:port.
func listServers(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	list, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return nil, err
	}
	var servers []string
	for _, s := range list.Items {
		for _, p := range s.Ports {
			if p.Port == nil || (p.Name != nil && *p.Name != "https") {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				for _, a := range e.Addresses {
					servers = append(servers, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
				}
			}
		}
	}
	return servers, nil
}
