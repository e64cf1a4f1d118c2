// Package clusterdns is the cluster's DNS, as kube-dns and CoreDNS answer
// it, served by CoreDNS itself in the server's process: its kubernetes
// plugin (Services, headless Services, SRV records of named ports, Pod A
// records), forward (other names, to the host's resolvers) and cache. The
// kube-dns Service in kube-system, at the cluster DNS address every
// kubelet is given, has no selector: each server publishes where it
// serves DNS in an EndpointSlice of its own, and drops those of servers
// no longer among the kubernetes Service's endpoints. Nodes reach it
// through kube-proxy, as they reach CoreDNS's Pods elsewhere; no image is
// pulled.
package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"

	// The plugins the Corefile uses (directives).
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	"github.com/spf13/pflag"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/network"
	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
)

const (
	// User is the user the cluster DNS reads Services, EndpointSlices,
	// Pods and Namespaces as, and publishes its endpoints as.
	User = "system:kubeboot:coredns"
	// ServiceName is the Service in kube-system at the cluster DNS
	// address, kube-dns as kubeadm and k3s name it.
	ServiceName = "kube-dns"
	// managedBy marks the EndpointSlices the servers publish.
	managedBy = "clusterdns.kubeboot.io"
	// serverAnnotation names the advertise address of the server that
	// published an EndpointSlice: the kubernetes Service's endpoint by
	// which the others know it is alive, whatever family it serves.
	serverAnnotation = "clusterdns.kubeboot.io/server"
	// DefaultPort is where a server serves DNS on its advertise address
	// by default: not 53, which needs root and where the host's own
	// resolver may listen; the Service's port is 53.
	DefaultPort = 10053
	// syncInterval is how often a server checks its EndpointSlice and
	// drops those of servers gone.
	syncInterval = 10 * time.Second
	// kubeconfigName is CoreDNS's kubeconfig in the data dir.
	kubeconfigName = "coredns.kubeconfig"
)

// directives are CoreDNS's plugins this Corefile uses, in CoreDNS's
// order (plugin.cfg).
var directives = []string{"bind", "errors", "loadbalance", "cache", "kubernetes", "forward"}

// Options are the flags of the cluster DNS.
type Options struct {
	// Port is --cluster-dns-port: where each server serves DNS, on its
	// advertise address (0: a port the system picks).
	Port int
	// Upstreams is --cluster-dns-upstream: where names outside the
	// cluster are resolved. Default: the host's /etc/resolv.conf.
	Upstreams []string
}

// NewOptions returns the defaults.
func NewOptions() *Options { return &Options{Port: DefaultPort} }

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Port, "cluster-dns-port", o.Port,
		"The port each server serves cluster DNS on, on its advertise address (the kube-dns Service's port 53 leads there; 0: any free port).")
	fs.StringSliceVar(&o.Upstreams, "cluster-dns-upstream", o.Upstreams,
		"Where cluster DNS resolves names outside the cluster: DNS servers as address[:port] (default: the host's /etc/resolv.conf).")
}

// Validate checks the flags; each problem names its flag.
func (o *Options) Validate() error {
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("--cluster-dns-port %d is not a port", o.Port)
	}
	for _, u := range o.Upstreams {
		if _, err := netip.ParseAddrPort(u); err != nil {
			if _, err := netip.ParseAddr(u); err != nil {
				return fmt.Errorf("--cluster-dns-upstream %q is not an address or address:port", u)
			}
		}
	}
	return nil
}

// Component is the cluster DNS as a component of a server.
type Component struct {
	opts     *Options
	settings controlplane.Settings
}

// New returns the cluster DNS o describes (Validate first).
func New(o *Options) *Component { return &Component{opts: o} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "cluster DNS" }

// Complete implements controlplane.Component: the cluster DNS reads what
// CoreDNS's own ClusterRole lets it, and keeps the kube-dns Service and
// its EndpointSlices.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	c.settings = s
	return controlplane.Needs{
		User: User,
		Grant: func(ctx context.Context, client kubernetes.Interface) error {
			return errors.Join(grantRead(ctx, client), grantPublish(ctx, client))
		},
		// The right granted last.
		Allowed: authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Verb: "create", Group: discoveryv1.GroupName, Resource: "endpointslices"},
	}, nil
}

// The cluster DNS's rights: to read what CoreDNS's ClusterRole lets it
// read, and to keep the kube-dns Service and its EndpointSlices.
var (
	grantRead = controlplane.GrantClusterRole(User, User,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	)
	grantPublish = controlplane.GrantRole(metav1.NamespaceSystem, User, User,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
	)
)

// Run implements controlplane.Component: it keeps the kube-dns Service,
// serves DNS on the server's advertise address, and publishes it.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	logger := klog.FromContext(ctx).WithName("cluster-dns")
	client, err := s.Client(User)
	if err != nil {
		return err
	}
	if err := c.ensureService(ctx, client); err != nil {
		return err
	}
	kubeconfig := filepath.Join(s.DataDir(), kubeconfigName)
	if err := s.WriteUserKubeconfig(kubeconfig, User, nil); err != nil {
		return fmt.Errorf("cluster DNS's kubeconfig: %w", err)
	}
	addrs := c.servedAddrs(ctx, s.AdvertiseAddress())
	port := c.opts.Port
	if port == 0 {
		if port, err = freePort(addrs); err != nil {
			return fmt.Errorf("cluster DNS on %s (--cluster-dns-port 0): %w", addrs, err)
		}
	}
	instance, err := start(c.corefile(addrs, port, kubeconfig))
	// A Corefile refused after the kubernetes plugin's setup began skips
	// setUp's callback: klog is given back here too.
	klog.ClearLogger()
	if err != nil {
		return fmt.Errorf("cluster DNS on %s (--cluster-dns-port): %w", addrs, err)
	}
	defer instance.Stop() //nolint:errcheck // stopping is best effort
	own := make([]*discoveryv1.EndpointSlice, len(addrs))
	for i, a := range addrs {
		own[i] = endpointSlice(s.AdvertiseAddress(), netip.AddrPortFrom(a, uint16(port)))
	}
	logger.Info("Serving cluster DNS", "addresses", addrs, "port", port, "service", c.settings.Nodes.ClusterDNS, "domain", c.settings.Nodes.ClusterDomain)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := publish(ctx, client, own); err != nil && ctx.Err() == nil {
			logger.Error(err, "Publishing where cluster DNS is served")
		}
	}, syncInterval)
	// A server that stops takes its endpoints along; one that dies is
	// dropped by the others.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, e := range own {
		if err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Delete(stopCtx, e.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Removing this server's cluster DNS endpoint", "endpointSlice", e.Name)
		}
	}
	return nil
}

// servedAddrs are the addresses this server serves DNS on: one of each
// family of the cluster DNS's addresses, so that the kube-dns Service
// has endpoints behind each ClusterIP. The advertise address serves its
// family; another family is served on the host's address of that family
// on the advertise address's interface, as the one the API server would
// advertise for it. A family the host has no such address of is left to
// the other servers, and said once.
func (c *Component) servedAddrs(ctx context.Context, advertise netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, dns := range c.settings.Nodes.ClusterDNS {
		family := network.FamilyOf(dns)
		if network.FamilyOf(advertise) == family {
			out = append(out, advertise)
			continue
		}
		a, err := network.InterfaceAddrOf(advertise, family)
		if err != nil {
			klog.FromContext(ctx).Info("This server serves no cluster DNS of this family: the other servers do, if they can", "address", dns, "err", err)
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		out = append(out, advertise)
	}
	return out
}

// corefile is the Corefile of a server serving on addrs, port.
func (c *Component) corefile(addrs []netip.Addr, port int, kubeconfig string) string {
	upstreams := "/etc/resolv.conf"
	if len(c.opts.Upstreams) > 0 {
		upstreams = strings.Join(c.opts.Upstreams, " ")
	}
	bind := make([]string, len(addrs))
	for i, a := range addrs {
		bind[i] = a.String()
	}
	return fmt.Sprintf(`.:%d {
    bind %s
    errors
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    forward . %s
    cache 30
    loadbalance
}
`, port, strings.Join(bind, " "), c.settings.Nodes.ClusterDomain, kubeconfig, upstreams)
}

// setUp sets CoreDNS's plugin order once for the process, and gives klog
// back to the process as soon as the kubernetes plugin is set up: its
// setup points klog, process-wide, at CoreDNS's log, and the instance's
// start then waits for the plugin's informers (up to its
// startup_timeout, 5 s), during which every component's lines would
// be written in CoreDNS's format instead of klog's.
var setUp = sync.OnceValue(func() error {
	caddy.Quiet, dnsserver.Quiet = true, true
	caddy.RegisterParsingCallback("dns", "kubernetes", func(caddy.Context) error {
		klog.ClearLogger()
		return nil
	})
	return dnsserver.SetDirectives(directives)
})

// start starts a CoreDNS instance on corefile.
func start(corefile string) (*caddy.Instance, error) {
	if err := setUp(); err != nil {
		return nil, err
	}
	return caddy.Start(caddy.CaddyfileInput{Filepath: "Corefile", Contents: []byte(corefile), ServerTypeName: "dns"})
}

// freePort is a port free on each of addrs for TCP and UDP both. CoreDNS
// serves DNS over both on the port its Corefile names; asked for port 0,
// the system would pick one per protocol, and the EndpointSlice, which
// has one port per protocol but one Service port behind both, would send
// TCP to the UDP one.
func freePort(addrs []netip.Addr) (int, error) {
	if len(addrs) == 0 {
		return 0, errors.New("no address to serve on")
	}
	for range 100 {
		l, err := net.Listen("tcp", netip.AddrPortFrom(addrs[0], 0).String())
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).AddrPort().Port()
		free := freeOn(addrs, port)
		l.Close()
		if free {
			return int(port), nil
		}
	}
	return 0, errors.New("no port is free for both TCP and UDP")
}

// freeOn reports whether port is free for UDP on each of addrs, and for
// TCP on all but the first, whose TCP listener the caller holds.
func freeOn(addrs []netip.Addr, port uint16) bool {
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i, a := range addrs {
		p, err := net.ListenPacket("udp", netip.AddrPortFrom(a, port).String())
		if err != nil {
			return false
		}
		held = append(held, p)
		if i == 0 {
			continue
		}
		l, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
		if err != nil {
			return false
		}
		held = append(held, l)
	}
	return true
}

// ensureService creates the kube-dns Service at the cluster DNS's
// addresses if it is missing, and gives one of the primary address the
// others (a cluster made single-stack, its Service ranges now of both
// families) or drops those no longer asked for, as Kubernetes lets a
// Service's secondary family come and go. One whose primary ClusterIP is
// another address is an error, as kubeadm's.
func (c *Component) ensureService(ctx context.Context, client kubernetes.Interface) error {
	ips := c.settings.Nodes.ClusterDNS.Strings()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			"k8s-app": ServiceName, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("dns-tcp")},
			},
		},
	}
	setClusterIPs(&svc.Spec, c.settings.Nodes.ClusterDNS)
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		services := client.CoreV1().Services(metav1.NamespaceSystem)
		got, err := services.Get(ctx, ServiceName, metav1.GetOptions{})
		if err == nil {
			switch {
			case got.Spec.ClusterIP != ips[0]:
				return false, fmt.Errorf("service kube-system/%s has ClusterIP %s, not the cluster DNS address %s (--cluster-dns)", ServiceName, got.Spec.ClusterIP, ips[0])
			case slices.Equal(got.Spec.ClusterIPs, ips):
				return true, nil
			}
			setClusterIPs(&got.Spec, c.settings.Nodes.ClusterDNS)
			_, err = services.Update(ctx, got, metav1.UpdateOptions{})
			if apierrors.IsInvalid(err) {
				return false, fmt.Errorf("the kube-dns Service at %s (--cluster-dns): %w", strings.Join(ips, ","), err)
			}
			return false, nil // read it back
		}
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		_, err = services.Create(ctx, svc, metav1.CreateOptions{})
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return false, nil // read it back
		case apierrors.IsInvalid(err):
			return false, fmt.Errorf("the kube-dns Service at %s (--cluster-dns): %w", strings.Join(ips, ","), err)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	return nil
}

// setClusterIPs gives spec the cluster DNS's addresses, their families
// and the family policy they need.
func setClusterIPs(spec *corev1.ServiceSpec, addrs nodesettings.Addrs) {
	spec.ClusterIPs = addrs.Strings()
	spec.ClusterIP = spec.ClusterIPs[0]
	spec.IPFamilies = nil
	for _, a := range addrs {
		spec.IPFamilies = append(spec.IPFamilies, corev1.IPFamily(network.FamilyOf(a)))
	}
	policy := corev1.IPFamilyPolicySingleStack
	if len(addrs) > 1 {
		policy = corev1.IPFamilyPolicyRequireDualStack
	}
	spec.IPFamilyPolicy = &policy
}

// endpointSlice is the EndpointSlice of the server advertising
// advertise, serving DNS at served, over UDP and TCP.
func endpointSlice(advertise netip.Addr, served netip.AddrPort) *discoveryv1.EndpointSlice {
	addr := served.Addr()
	family := discoveryv1.AddressTypeIPv4
	if addr.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	p := int32(served.Port())
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ServiceName + "-" + strings.NewReplacer(".", "-", ":", "-").Replace(addr.String()),
			Namespace:   metav1.NamespaceSystem,
			Labels:      map[string]string{discoveryv1.LabelServiceName: ServiceName, discoveryv1.LabelManagedBy: managedBy},
			Annotations: map[string]string{serverAnnotation: advertise.String()},
		},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: &p, Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: &p, Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
}

// publish stores own, and deletes the EndpointSlices of servers that are
// no longer among the kubernetes Service's endpoints.
func publish(ctx context.Context, client kubernetes.Interface, own []*discoveryv1.EndpointSlice) error {
	endpointSlices := client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem)
	mine := map[string]bool{}
	for _, e := range own {
		mine[e.Name] = true
		got, err := endpointSlices.Get(ctx, e.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := endpointSlices.Create(ctx, e, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case err != nil:
			return err
		case !sameEndpoints(got, e) || got.Annotations[serverAnnotation] != e.Annotations[serverAnnotation]:
			got.Endpoints, got.Ports = e.Endpoints, e.Ports
			metav1.SetMetaDataAnnotation(&got.ObjectMeta, serverAnnotation, e.Annotations[serverAnnotation])
			if _, err := endpointSlices.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	live, err := serverAddresses(ctx, client)
	if err != nil {
		return err
	}
	ours, err := endpointSlices.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=" + managedBy})
	if err != nil {
		return err
	}
	for _, s := range ours.Items {
		server := sliceServer(&s)
		if mine[s.Name] || server == "" || live[server] {
			continue
		}
		if err := endpointSlices.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		klog.FromContext(ctx).Info("Dropped the cluster DNS endpoint of a server gone", "endpointSlice", s.Name, "server", server)
	}
	return nil
}

// sliceServer is the advertise address of the server that published s:
// its annotation, else (published before servers served more than one
// family) the address it serves on.
func sliceServer(s *discoveryv1.EndpointSlice) string {
	if a := s.Annotations[serverAnnotation]; a != "" {
		return a
	}
	if len(s.Endpoints) == 0 || len(s.Endpoints[0].Addresses) == 0 {
		return ""
	}
	return s.Endpoints[0].Addresses[0]
}

// serverAddresses are the addresses of the kubernetes Service's
// endpoints: the servers alive.
func serverAddresses(ctx context.Context, client kubernetes.Interface) (map[string]bool, error) {
	list, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				live[a] = true
			}
		}
	}
	return live, nil
}

// sameEndpoints reports whether a and b list the same endpoint and ports.
func sameEndpoints(a, b *discoveryv1.EndpointSlice) bool {
	if len(a.Endpoints) != 1 || len(a.Ports) != len(b.Ports) || strings.Join(a.Endpoints[0].Addresses, ",") != strings.Join(b.Endpoints[0].Addresses, ",") {
		return false
	}
	for i := range a.Ports {
		if a.Ports[i].Port == nil || *a.Ports[i].Port != *b.Ports[i].Port || ptr.Deref(a.Ports[i].Name, "") != ptr.Deref(b.Ports[i].Name, "") {
			return false
		}
	}
	return true
}
