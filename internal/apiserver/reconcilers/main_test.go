package reconcilers_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// One server for the package, its own reconciler off ("none") so that only
// the reconcilers under test write default/kubernetes. The tests share that
// one object, so they run one after the other and each sets the state it
// starts from.
var (
	client kubernetes.Interface
	etcd   *clientv3.Client
)

func TestMain(m *testing.M) {
	kubeboottest.Main(kubeboottest.Options{Configure: func(c *controlplane.Config) { c.EndpointReconcilerType = string(reconcilers.None) }}, func(srv *kubeboottest.Server) int { return runTests(m, srv) })
}

// runTests sets up what the tests share on srv and runs them.
func runTests(m *testing.M, srv *kubeboottest.Server) int {
	client = kubernetes.NewForConfigOrDie(srv.Config)
	var err error
	etcd, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{"unix://" + filepath.Join(srv.DataDir, "etcd", "etcd.sock")},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connecting to etcd:", err)
		return 1
	}
	defer etcd.Close()
	return m.Run()
}

// Addresses sort as strings: .1 < .10 < .2 < .3 < .4.
const (
	ipA = "198.51.100.1"
	ipB = "198.51.100.10"
	ipC = "198.51.100.2"
	ipD = "198.51.100.3"
	ipE = "198.51.100.4"
	ip6 = "2001:db8::10"
)

var (
	httpsPorts = []corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP}}
	skipMirror = map[string]string{discoveryv1.LabelSkipMirror: "true"}
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func addr(t *testing.T, s string) netip.Addr {
	t.Helper()
	ip, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

func subset(ports []corev1.EndpointPort, ips ...string) corev1.EndpointSubset {
	s := corev1.EndpointSubset{Ports: slices.Clone(ports)}
	for _, ip := range ips {
		s.Addresses = append(s.Addresses, corev1.EndpointAddress{IP: ip})
	}
	return s
}

func endpoints(labels map[string]string, subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: reconcilers.ServiceName, Namespace: metav1.NamespaceDefault, Labels: labels},
		Subsets:    subsets,
	}
}

// reset deletes the kubernetes Endpoints and EndpointSlice, then creates
// e (when not nil) and returns it as stored.
func reset(t *testing.T, e *corev1.Endpoints) *corev1.Endpoints {
	t.Helper()
	ctx := ctxFor(t)
	err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Delete(ctx, reconcilers.ServiceName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err = client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Delete(ctx, reconcilers.ServiceName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if e == nil {
		return nil
	}
	got, err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Create(ctx, e, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the initial endpoints: %v", err)
	}
	return got
}

func getEndpoints(t *testing.T) *corev1.Endpoints {
	t.Helper()
	e, err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctxFor(t), reconcilers.ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func getSlice(t *testing.T) *discoveryv1.EndpointSlice {
	t.Helper()
	s, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctxFor(t), reconcilers.ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkPublished checks that the Endpoints hold exactly ips (sorted as
// strings, in one subset) with ports and the skip-mirror label, and that
// the EndpointSlice mirrors them.
func checkPublished(t *testing.T, ips []string, ports []corev1.EndpointPort) {
	t.Helper()
	e := getEndpoints(t)
	if e == nil {
		t.Fatalf("no Endpoints %s, want %v", reconcilers.ServiceName, ips)
	}
	if e.Labels[discoveryv1.LabelSkipMirror] != "true" {
		t.Errorf("Endpoints labels = %v, want %s=true", e.Labels, discoveryv1.LabelSkipMirror)
	}
	want := slices.Clone(ips)
	slices.Sort(want)
	var wantSubsets []corev1.EndpointSubset
	if len(want) > 0 {
		wantSubsets = []corev1.EndpointSubset{subset(ports, want...)}
	}
	if !apiequality.Semantic.DeepEqual(e.Subsets, wantSubsets) {
		t.Errorf("Endpoints subsets = %+v, want %+v", e.Subsets, wantSubsets)
	}

	s := getSlice(t)
	if s == nil {
		t.Fatalf("no EndpointSlice %s", reconcilers.ServiceName)
	}
	if s.Labels[discoveryv1.LabelServiceName] != reconcilers.ServiceName {
		t.Errorf("EndpointSlice labels = %v, want %s=%s", s.Labels, discoveryv1.LabelServiceName, reconcilers.ServiceName)
	}
	wantType := discoveryv1.AddressTypeIPv4
	if len(want) > 0 && addr(t, want[0]).Is6() {
		wantType = discoveryv1.AddressTypeIPv6
	}
	if s.AddressType != wantType {
		t.Errorf("EndpointSlice addressType = %s, want %s", s.AddressType, wantType)
	}
	var got []string
	for _, ep := range s.Endpoints {
		got = append(got, ep.Addresses...)
		if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
			t.Errorf("EndpointSlice endpoint %v not ready", ep.Addresses)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("EndpointSlice addresses = %v, want %v", got, want)
	}
	var gotPorts []corev1.EndpointPort
	for _, p := range s.Ports {
		if p.Name == nil || p.Port == nil || p.Protocol == nil {
			t.Errorf("EndpointSlice port %+v has unset fields", p)
			continue
		}
		gotPorts = append(gotPorts, corev1.EndpointPort{Name: *p.Name, Port: *p.Port, Protocol: *p.Protocol})
	}
	if len(want) > 0 && !apiequality.Semantic.DeepEqual(gotPorts, ports) {
		t.Errorf("EndpointSlice ports = %+v, want %+v", gotPorts, ports)
	}
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// checkSecondPassIsNoOp reconciles again with the same arguments and fails
// the test if that rewrote the Endpoints (as last read: after) or the
// EndpointSlice: a reconciler writes only what differs.
func checkSecondPassIsNoOp(ctx context.Context, t *testing.T, r reconcilers.EndpointReconciler, ip netip.Addr,
	ports []corev1.EndpointPort, reconcilePorts bool, after *corev1.Endpoints) {
	t.Helper()
	slice := getSlice(t)
	if err := r.ReconcileEndpoints(ctx, ip, ports, reconcilePorts); err != nil {
		t.Fatalf("second ReconcileEndpoints: %v", err)
	}
	if again := getEndpoints(t); again.ResourceVersion != after.ResourceVersion {
		t.Errorf("second pass rewrote the Endpoints: %+v", again.Subsets)
	}
	if again := getSlice(t); again.ResourceVersion != slice.ResourceVersion {
		t.Errorf("second pass rewrote the EndpointSlice")
	}
}
