package service_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeboot/kubeboot/internal/allocator/clusterip"
	"github.com/kubeboot/kubeboot/internal/allocator/nodeport"
	"github.com/kubeboot/kubeboot/internal/api"
	"github.com/kubeboot/kubeboot/internal/etcd/etcdtest"
	"github.com/kubeboot/kubeboot/internal/network"
	"github.com/kubeboot/kubeboot/internal/registry"
	"github.com/kubeboot/kubeboot/internal/registry/ipaddress"
	"github.com/kubeboot/kubeboot/internal/registry/service"
	"github.com/kubeboot/kubeboot/internal/storage"
)

// One embedded etcd for the package; each test builds its "cluster" (the
// allocators of one or more apiservers) on a key prefix of its own.
var (
	etcdClient *clientv3.Client
	scheme     *runtime.Scheme
	prefixes   atomic.Int64
)

func TestMain(m *testing.M) {
	etcdtest.Main(func(c *clientv3.Client) int {
		etcdClient, scheme = c, api.NewScheme()
		return m.Run()
	})
}

const defaultPorts = "30000-32767"

// cluster is what one apiserver allocates with: real ClusterIP allocators
// on a real IPAddress registry, and the real NodePort allocator on its
// bitmap, all in etcd under prefix.
type cluster struct {
	alloc   *service.Allocators
	prefix  string
	backend *storage.Backend
	ips     *registry.REST
	ports   *nodeport.Allocator
}

// newCluster starts the allocators of an apiserver with
// --service-cluster-ip-range=cidrs and --service-node-port-range=ports.
func newCluster(t testing.TB, ports string, cidrs ...string) *cluster {
	return apiserver(t, fmt.Sprintf("/service-test-%d", prefixes.Add(1)), ports, cidrs...)
}

// apiserver starts allocators on the state under prefix: another
// apiserver of the same cluster, or the same one restarted with other
// flags.
func apiserver(t testing.TB, prefix, ports string, cidrs ...string) *cluster {
	t.Helper()
	backend, err := storage.New(storage.Config{Client: etcdClient, Prefix: prefix, Serializer: api.NewCodecs(scheme)})
	if err != nil {
		t.Fatal(err)
	}
	ipStore, err := ipaddress.NewREST(backend, scheme)
	if err != nil {
		t.Fatal(err)
	}
	ips := map[corev1.IPFamily]service.IPAllocator{}
	var primary corev1.IPFamily
	for i, c := range cidrs {
		a := clusterip.New(clusterip.NewRange(netip.MustParsePrefix(c)), ipStore, nil)
		ips[a.Family()] = a
		if i == 0 {
			primary = a.Family()
		}
	}
	pr, err := network.ParsePortRange(ports)
	if err != nil {
		t.Fatal(err)
	}
	raw, destroy, err := backend.Raw(corev1.Resource("rangeallocations"), nodeport.Key,
		func() runtime.Object { return &corev1.RangeAllocation{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	np := nodeport.New(pr, raw)
	t.Cleanup(func() {
		np.Close()
		destroy()
		ipStore.Destroy()
		backend.Destroy()
	})
	return &cluster{alloc: service.NewAllocators(primary, ips, np), prefix: prefix, backend: backend, ips: ipStore, ports: np}
}

// owner returns "namespace/name" of the Service holding ip, or "".
func (c *cluster) owner(t testing.TB, ip string) string {
	t.Helper()
	obj, err := c.ips.Get(context.Background(), ip, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	ref := obj.(*networkingv1.IPAddress).Spec.ParentRef
	return ref.Namespace + "/" + ref.Name
}

// heldIPs lists every allocated ClusterIP, straight from etcd.
func (c *cluster) heldIPs(t testing.TB) []string {
	t.Helper()
	resp, err := etcdClient.Get(context.Background(), c.prefix+"/ipaddresses/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key[len(c.prefix+"/ipaddresses/"):]))
	}
	slices.Sort(out)
	return out
}

// heldPorts lists every allocated NodePort, as stored.
func (c *cluster) heldPorts(t testing.TB) []int {
	t.Helper()
	ports, err := c.ports.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Service builders.

func newService(name string, mods ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, m := range mods {
		m(svc)
	}
	return svc
}

func ofType(t corev1.ServiceType) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Type = t }
}

func withPolicy(p corev1.IPFamilyPolicy) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilyPolicy = &p }
}

func withFamilies(f ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilies = f }
}

func withClusterIPs(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.ClusterIP = ips[0]
		s.Spec.ClusterIPs = ips
	}
}

// withLegacyClusterIP sets only spec.clusterIP, as an old client does.
func withLegacyClusterIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.ClusterIP = ip }
}

func headless(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }

func selectorless(s *corev1.Service) { s.Spec.Selector = nil }

func withPorts(ports ...corev1.ServicePort) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports = ports }
}

func port(name string, number int32, proto corev1.Protocol, nodePort int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: number, Protocol: proto, TargetPort: intstr.FromInt32(number), NodePort: nodePort}
}

func localTraffic(s *corev1.Service) {
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

func externalName(s *corev1.Service) {
	s.Spec.Type = corev1.ServiceTypeExternalName
	s.Spec.ExternalName = "example.com"
	s.Spec.Selector = nil
}

// statusOf returns the API status of err (which must be one).
func statusOf(t testing.TB, err error) metav1.Status {
	t.Helper()
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		t.Fatalf("error %v (%T) is not an API status", err, err)
	}
	return s.Status()
}

func nodePorts(svc *corev1.Service) []int {
	var out []int
	for _, p := range svc.Spec.Ports {
		out = append(out, int(p.NodePort))
	}
	return out
}

func sortedUnique(ports ...int) []int {
	var out []int
	for _, p := range ports {
		if p != 0 && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
