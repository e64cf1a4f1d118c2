package kubernetesservice_test

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/kubernetesservice"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// One server for the package. Its own bootstrap controller publishes no
// endpoints ("none") and, after its first pass at start, waits an hour, so
// the controllers under test are the only ones writing default/kubernetes.
// Tests share that one Service and run one after the other.
var (
	client   kubernetes.Interface
	recorder record.EventRecorder
)

func TestMain(m *testing.M) {
	kubeboottest.Main(kubeboottest.Options{
		Configure: func(c *controlplane.Config) {
			c.EndpointReconcilerType = string(reconcilers.None)
			c.EndpointReconcileInterval = time.Hour
		},
	}, func(srv *kubeboottest.Server) int { return runTests(m, srv) })
}

// runTests sets up what the tests share on srv and runs them.
func runTests(m *testing.M, srv *kubeboottest.Server) int {
	client = kubernetes.NewForConfigOrDie(srv.Config)
	// The server's controller makes its first pass once /readyz is 200,
	// which may be after Start returned; the pass ends with creating the
	// Service. Wait for it, so that it cannot race the first test.
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, reconcilers.ServiceName, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "the server did not create the kubernetes Service:", err)
		return 1
	}
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kube-apiserver"})
	return m.Run()
}

const (
	publicIP   = "198.51.100.20"
	serviceIP  = "10.0.0.1"
	securePort = 16443
)

// ready is a server that is ready at once.
var ready = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func config(nodePort int32) kubernetesservice.Config {
	return kubernetesservice.Config{
		AdvertiseAddress: netip.MustParseAddr(publicIP),
		ServiceIP:        netip.MustParseAddr(serviceIP),
		SecurePort:       securePort,
		NodePort:         nodePort,
		Interval:         100 * time.Millisecond,
		Ready:            ready,
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func services() typedcorev1.ServiceInterface {
	return client.CoreV1().Services(metav1.NamespaceDefault)
}

func getService(t *testing.T) *corev1.Service {
	t.Helper()
	svc, err := services().Get(ctxFor(t), reconcilers.ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// deleteService removes the kubernetes Service and its endpoints.
func deleteService(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	if err := services().Delete(ctx, reconcilers.ServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Delete(ctx, reconcilers.ServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Delete(ctx, reconcilers.ServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func endpointIPs(t *testing.T) []string {
	t.Helper()
	e, err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctxFor(t), reconcilers.ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, s := range e.Subsets {
		for _, a := range s.Addresses {
			ips = append(ips, a.IP)
		}
	}
	return ips
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// reference is kube-apiserver 1.36's kubernetes Service, with the parts the
// flags decide (ClusterIP, target port, type and node port) set from ours.
func reference(t *testing.T, nodePort int32) *corev1.Service {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kubernetes-service.json"))
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := json.Unmarshal(b, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.ClusterIP = serviceIP
	svc.Spec.ClusterIPs = []string{serviceIP}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(securePort)
	if nodePort > 0 {
		cluster := corev1.ServiceExternalTrafficPolicyCluster
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = nodePort
		svc.Spec.ExternalTrafficPolicy = cluster
	}
	return &svc
}

// A pass creates the Service in kube-apiserver's exact shape, and the
// endpoints listing this apiserver.
func TestSyncCreatesService(t *testing.T) {
	tests := []struct {
		name     string
		nodePort int32
	}{
		{name: "ClusterIP"},
		{name: "NodePort", nodePort: 30443},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			deleteService(t)
			c := kubernetesservice.New(config(tc.nodePort), client, reconcilers.NewMasterCount(client, 1), recorder)
			if err := c.Sync(ctx, true); err != nil {
				t.Fatalf("sync: %v", err)
			}
			got := getService(t)
			if got == nil {
				t.Fatal("no kubernetes Service after a pass")
			}
			want := reference(t, tc.nodePort)
			if !apiequality.Semantic.DeepEqual(got.Labels, want.Labels) {
				t.Errorf("labels = %v, want %v", got.Labels, want.Labels)
			}
			if !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
				gotJSON, _ := json.Marshal(got.Spec)
				wantJSON, _ := json.Marshal(want.Spec)
				t.Errorf("spec =\n%s\nwant\n%s", gotJSON, wantJSON)
			}
			if !apiequality.Semantic.DeepEqual(got.Status, want.Status) {
				t.Errorf("status = %+v, want %+v", got.Status, want.Status)
			}

			e, err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, reconcilers.ServiceName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("endpoints: %v", err)
			}
			wantSubsets := []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: publicIP}},
				Ports:     []corev1.EndpointPort{{Name: "https", Port: securePort, Protocol: corev1.ProtocolTCP}},
			}}
			if !apiequality.Semantic.DeepEqual(e.Subsets, wantSubsets) {
				t.Errorf("endpoints subsets = %+v, want %+v", e.Subsets, wantSubsets)
			}
			if e.Labels[discoveryv1.LabelSkipMirror] != "true" {
				t.Errorf("endpoints labels = %v", e.Labels)
			}
			s, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, reconcilers.ServiceName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("endpointslice: %v", err)
			}
			if len(s.Endpoints) != 1 || !slices.Equal(s.Endpoints[0].Addresses, []string{publicIP}) || len(s.Ports) != 1 || *s.Ports[0].Port != securePort {
				t.Errorf("endpointslice = %+v", s)
			}
		})
	}
}

// A deleted Service comes back at the next pass, whichever it is.
func TestSyncRecreatesDeletedService(t *testing.T) {
	ctx := ctxFor(t)
	deleteService(t)
	c := kubernetesservice.New(config(0), client, reconcilers.NewMasterCount(client, 1), recorder)
	if err := c.Sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	before := getService(t)
	for i := range 2 {
		if err := services().Delete(ctx, reconcilers.ServiceName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Sync(ctx, false); err != nil {
			t.Fatalf("pass %d after delete: %v", i, err)
		}
		after := getService(t)
		if after == nil || after.UID == before.UID {
			t.Fatalf("pass %d: Service not recreated (%v)", i, after)
		}
		if after.Spec.ClusterIP != serviceIP || after.Labels["provider"] != "kubernetes" {
			t.Errorf("recreated Service = %+v", after)
		}
		before = after
	}
}

func correctedEvents(t *testing.T, uid string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if string(e.InvolvedObject.UID) == uid && e.Reason == "ServiceSpecCorrected" {
			out = append(out, e)
		}
	}
	return out
}

// The first pass corrects ports and type that differ from the flags (with
// an Event); later passes leave manual edits alone (upstream #104252).
func TestSyncCorrectsAtStartOnly(t *testing.T) {
	tests := []struct {
		name     string
		nodePort int32 // the flags
		mutate   func(*corev1.Service)
	}{
		{name: "port", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Port = 8443 }},
		{name: "target port", mutate: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(1234) }},
		{name: "port name", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Name = "web" }},
		{name: "protocol", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolUDP }},
		{name: "extra port", mutate: func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)})
		}},
		{name: "NodePort while the flags say ClusterIP", mutate: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }},
		{name: "ClusterIP while the flags say NodePort", nodePort: 30444, mutate: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.Ports[0].NodePort = 0
			s.Spec.ExternalTrafficPolicy = ""
		}},
		{name: "another node port", nodePort: 30445, mutate: func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30446 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			deleteService(t)
			c := kubernetesservice.New(config(tc.nodePort), client, reconcilers.NewMasterCount(client, 1), recorder)
			if err := c.Sync(ctx, true); err != nil {
				t.Fatal(err)
			}
			want := getService(t)
			edited := want.DeepCopy()
			tc.mutate(edited)
			edited, err := services().Update(ctx, edited, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("editing the Service: %v", err)
			}

			// Later passes: left alone.
			if err := c.Sync(ctx, false); err != nil {
				t.Fatal(err)
			}
			if got := getService(t); got.ResourceVersion != edited.ResourceVersion {
				t.Errorf("a later pass rewrote the edited Service: %+v", got.Spec)
			}

			// The first pass of an apiserver: corrected.
			if err := c.Sync(ctx, true); err != nil {
				t.Fatalf("correcting pass: %v", err)
			}
			got := getService(t)
			if got.Spec.Type != want.Spec.Type || !apiequality.Semantic.DeepEqual(got.Spec.Ports, want.Spec.Ports) {
				t.Errorf("after the correcting pass: type %s ports %+v; want type %s ports %+v", got.Spec.Type, got.Spec.Ports, want.Spec.Type, want.Spec.Ports)
			}
			if got.Spec.ClusterIP != serviceIP {
				t.Errorf("clusterIP = %s, want %s", got.Spec.ClusterIP, serviceIP)
			}
			eventually(t, 5*time.Second, "a ServiceSpecCorrected Event", func() bool {
				return len(correctedEvents(t, string(got.UID))) > 0
			})
			ev := correctedEvents(t, string(got.UID))[0]
			if ev.Type != corev1.EventTypeNormal || ev.InvolvedObject.Kind != "Service" || ev.InvolvedObject.Name != reconcilers.ServiceName {
				t.Errorf("event = %+v", ev)
			}

			// Correct already: a correcting pass writes nothing.
			if err := c.Sync(ctx, true); err != nil {
				t.Fatal(err)
			}
			if again := getService(t); again.ResourceVersion != got.ResourceVersion {
				t.Errorf("a correcting pass rewrote a correct Service")
			}
		})
	}
}

// Start removes our endpoint left from an unclean exit, publishes us only
// once Ready says so, and Stop removes us again.
func TestStartWaitsForReadyAndStopRemoves(t *testing.T) {
	ctx := ctxFor(t)
	deleteService(t)
	// Left over from our previous, unclean exit, next to another apiserver.
	_, err := client.CoreV1().Endpoints(metav1.NamespaceDefault).Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: reconcilers.ServiceName, Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: publicIP}, {IP: "198.51.100.21"}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: securePort, Protocol: corev1.ProtocolTCP}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	becomesReady := make(chan struct{})
	cfg := config(0)
	cfg.Ready = becomesReady
	c := kubernetesservice.New(cfg, client, reconcilers.NewMasterCount(client, 2), recorder)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop(context.Background())
		}
	}()
	if ips := endpointIPs(t); !slices.Equal(ips, []string{"198.51.100.21"}) {
		t.Errorf("after Start, endpoints = %v; want the stale own address removed", ips)
	}

	// Time for a controller that would not wait to publish itself.
	time.Sleep(3 * cfg.Interval)
	if ips := endpointIPs(t); slices.Contains(ips, publicIP) {
		t.Errorf("published while not ready: %v", ips)
	}
	if getService(t) != nil {
		t.Errorf("Service written while not ready")
	}

	close(becomesReady)
	eventually(t, 5*time.Second, "publication once ready", func() bool {
		return slices.Contains(endpointIPs(t), publicIP)
	})
	if getService(t) == nil {
		t.Error("no Service once ready")
	}

	start := time.Now()
	if err := c.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	if d := time.Since(start); d > 2*cfg.Interval+time.Second {
		t.Errorf("Stop took %s", d)
	}
	if ips := endpointIPs(t); !slices.Equal(ips, []string{"198.51.100.21"}) {
		t.Errorf("after Stop, endpoints = %v; want only the other apiserver", ips)
	}
}

// Stop never blocks longer than two intervals, even when removing the
// endpoint cannot succeed (etcd unreachable).
func TestStopBounded(t *testing.T) {
	deleteService(t)
	dead, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(t.TempDir(), "nothing.sock")}})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	cfg := config(0)
	cfg.Interval = 200 * time.Millisecond
	r := reconcilers.NewLease(client, dead, "/registry", time.Second, scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion))
	c := kubernetesservice.New(cfg, client, r, recorder)
	startCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	// The loop is running (the Service is written before the endpoints,
	// which hang on etcd).
	eventually(t, 5*time.Second, "the first pass", func() bool { return getService(t) != nil })

	start := time.Now()
	err = c.Stop(context.Background())
	d := time.Since(start)
	if err == nil {
		t.Error("Stop reported success although etcd is unreachable")
	}
	if d > 2*cfg.Interval+500*time.Millisecond {
		t.Errorf("Stop took %s, want at most about 2 intervals (%s)", d, 2*cfg.Interval)
	}
}
