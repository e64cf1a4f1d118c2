// Package gateway measures a node's Gateway with many routes, end to end
// through the API: `kubeboot server --node` (the server's controller and
// the node's data plane in one process) serving a Gateway of routeCount
// HTTPRoutes, each its own hostname, to a backend in this process (a
// Service of an EndpointSlice naming it). It reports what the routes
// cost the process's memory and how long an HTTPRoute's change takes to
// reach traffic, and how soon a restarted process serves its Gateway
// again. run.sh makes the namespace. The data plane's own
// figures (requests/s against straight to the backend, the server's pass
// and the node's apply) are internal/components/gateway's and
// dataplane's benchmarks.
package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// routeCount is issue 62's target's number of HTTPRoutes.
const routeCount = 1000

// listenerPort is the Gateway's.
const listenerPort = 8080

// initialPath is every route's path prefix at first; a change makes one's
// /vN, which the route did not serve before (a prefix matches whole path
// elements).
const initialPath = "/v-initial"

// BenchmarkRouteChange creates a Gateway and routeCount HTTPRoutes on
// `server --node`, reads the process's idle RSS before and after, then
// changes b.N routes' paths one at a time, each timed from its update
// call to the first request on its new path the node answers 200.
func BenchmarkRouteChange(b *testing.B) {
	srv := harness.StartNodeServer(b)
	config, err := srv.Config()
	if err != nil {
		b.Fatal(err)
	}
	client := srv.MustClient(b)
	gw := gatewayclient.NewForConfigOrDie(config).GatewayV1()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	addr, ns := harness.Addr(0), metav1.NamespaceDefault
	startBackend(ctx, b, client, addr)
	if _, err := waitReadyNode(ctx, srv); err != nil {
		b.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	before, liveBefore := rss(b, srv), liveHeap(ctx, b, srv)

	if _, err := gw.Gateways(ns).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "apps"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "kubeboot", Listeners: []gatewayv1.Listener{{Name: "http", Port: listenerPort, Protocol: gatewayv1.HTTPProtocolType}}}},
		metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := range routeCount {
		if _, err := gw.HTTPRoutes(ns).Create(ctx, route(i, initialPath), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	last := routeCount - 1
	waitServed(ctx, b, addr, last, initialPath)
	b.Logf("%d HTTPRoutes created and the last served in %s", routeCount, time.Since(start).Round(time.Millisecond))
	// Long enough for the collector to give back the burst's garbage.
	time.Sleep(30 * time.Second)
	after, liveAfter := rss(b, srv), liveHeap(ctx, b, srv)

	var changes []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := i * 7919 % routeCount // spread over the routes
		path := fmt.Sprintf("/v%d", i)
		r, err := gw.HTTPRoutes(ns).Get(ctx, name(k), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		r.Spec.Rules[0].Matches[0].Path.Value = ptr.To(path)
		start := time.Now()
		if _, err := gw.HTTPRoutes(ns).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitServed(ctx, b, addr, k, path)
		changes = append(changes, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(changes)
	b.ReportMetric(ms(changes[len(changes)/2]), "p50-ms")
	b.ReportMetric(ms(changes[len(changes)*99/100]), "p99-ms")
	b.ReportMetric(ms(changes[len(changes)-1]), "max-ms")
	b.ReportMetric(float64(before["VmRSS"])/1024, "idle-rss-MiB")
	b.ReportMetric(float64(after["VmRSS"]-before["VmRSS"])/1024, "routes-rss-MiB")
	b.ReportMetric(float64(after["VmRSS"]-before["VmRSS"])*1024/routeCount, "rss-bytes/route")
	b.ReportMetric(float64(after["RssAnon"]-before["RssAnon"])*1024/routeCount, "anon-bytes/route")
	b.ReportMetric((liveAfter-liveBefore)/routeCount, "live-heap-bytes/route")
}

// startBackend serves "ok" from this process at addr, as the endpoint of
// Service web (an EndpointSlice of its own, no Pod).
func startBackend(ctx context.Context, b *testing.B, client kubernetes.Interface, addr string) {
	b.Helper()
	backend, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		_ = http.Serve(backend, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	}()
	b.Cleanup(func() { backend.Close() })
	backendPort := int32(backend.Addr().(*net.TCPAddr).Port)
	ns := metav1.NamespaceDefault
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(backendPort)}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(backendPort)}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRestart restarts `server --node` serving a Gateway and its
// HTTPRoute (SIGTERM, then the same data dir) and times each new process
// from its exec to the first request its Gateway answers 200, and to
// /readyz.
func BenchmarkRestart(b *testing.B) {
	addr := harness.Addr(0)
	harness.RequireAddrs(b, addr)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	dataDir := filepath.Join(b.TempDir(), "data")
	args := append(harness.NodeServerArgs(b, addr, ""), harness.EmbeddedContainerd(b, harness.NodeDir(dataDir))...)
	srv := harness.StartReadyServer(b, 2*time.Minute, bin, dataDir, args...)
	config, err := srv.Config()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	startBackend(ctx, b, srv.MustClient(b), addr)
	if _, err := waitReadyNode(ctx, srv); err != nil {
		b.Fatal(err)
	}
	gw := gatewayclient.NewForConfigOrDie(config).GatewayV1()
	if _, err := gw.Gateways(metav1.NamespaceDefault).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "apps"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "kubeboot", Listeners: []gatewayv1.Listener{{Name: "http", Port: listenerPort, Protocol: gatewayv1.HTTPProtocolType}}}},
		metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := gw.HTTPRoutes(metav1.NamespaceDefault).Create(ctx, route(0, initialPath), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitServed(ctx, b, addr, 0, initialPath)

	var served, ready []time.Duration
	for b.Loop() {
		if err := srv.Terminate(time.Minute); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		done := make(chan time.Duration, 1)
		go func() {
			waitServed(ctx, b, addr, 0, initialPath)
			done <- time.Since(start)
		}()
		srv = harness.StartReadyServer(b, 2*time.Minute, bin, dataDir, args...)
		ready = append(ready, time.Since(start))
		served = append(served, <-done)
	}
	slices.Sort(served)
	slices.Sort(ready)
	b.ReportMetric(ms(served[len(served)/2]), "served-p50-ms")
	b.ReportMetric(ms(served[len(served)-1]), "served-max-ms")
	b.ReportMetric(ms(ready[len(ready)/2]), "ready-p50-ms")
}

// BenchmarkNodeGain measures what serving Gateways costs a node: an
// agent (the kubelet on upstream's fake CRI runtime) joined to a server
// that is no node, its idle RSS before the cluster has a Gateway (the
// data plane holds one watch), with a Gateway and one HTTPRoute, and with
// routeCount, each read 10 s after the node serves the last change
// (bench/gateway/run.sh -test.bench NodeGain -test.benchtime 1x).
func BenchmarkNodeGain(b *testing.B) {
	addr := harness.Addr(0)
	harness.RequireAddrs(b, addr)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	srv := harness.StartReadyServer(b, 2*time.Minute, bin, filepath.Join(b.TempDir(), "server"),
		"--bind-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16")
	config, err := srv.Config()
	if err != nil {
		b.Fatal(err)
	}
	client := srv.MustClient(b)
	token, err := os.ReadFile(filepath.Join(srv.DataDir, "token"))
	if err != nil {
		b.Fatal(err)
	}
	args := append([]string{"--server", "https://" + addr + ":6443", "--token", strings.TrimSpace(string(token)),
		"--node-name", "node", "--node-ip", addr}, harness.NodeArgs(b, harness.StartFakeCRI(b))...)
	agent := harness.StartAgent(b, bin, filepath.Join(b.TempDir(), "agent"), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if _, err := waitReadyNode(ctx, srv); err != nil {
		b.Fatalf("%v\n%s", err, agent.Logs())
	}
	startBackend(ctx, b, client, addr)
	settled := func() float64 {
		time.Sleep(10 * time.Second)
		st, err := harness.ProcStatus(agent.PID())
		if err != nil {
			b.Fatal(err)
		}
		return float64(st["VmRSS"]) / 1024
	}
	for i := 0; b.Loop(); i++ {
		if i > 0 {
			// The Gateway and its routes are made once: the later
			// iterations have nothing to add (run it -test.benchtime 1x).
			continue
		}
		idle := settled()
		gw := gatewayclient.NewForConfigOrDie(config).GatewayV1()
		ns := metav1.NamespaceDefault
		if _, err := gw.Gateways(ns).Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "apps"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "kubeboot", Listeners: []gatewayv1.Listener{{Name: "http", Port: listenerPort, Protocol: gatewayv1.HTTPProtocolType}}}},
			metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := gw.HTTPRoutes(ns).Create(ctx, route(0, initialPath), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitServed(ctx, b, addr, 0, initialPath)
		one := settled()
		for i := 1; i < routeCount; i++ {
			if _, err := gw.HTTPRoutes(ns).Create(ctx, route(i, initialPath), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		waitServed(ctx, b, addr, routeCount-1, initialPath)
		all := settled()
		b.ReportMetric(idle, "idle-rss-MiB")
		b.ReportMetric(one-idle, "gain-1-route-MiB")
		b.ReportMetric(all-idle, "gain-1000-routes-MiB")
	}
}

func name(i int) string { return fmt.Sprintf("route-%d", i) }

// route is HTTPRoute i: hostname route-i.example, a path prefix, to
// Service web.
func route(i int, path string) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "apps"}}},
		Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(name(i) + ".example")},
		Rules: []gatewayv1.HTTPRouteRule{{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(path)}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: "web", Port: ptr.To(gatewayv1.PortNumber(80))}}}},
		}},
	}}
}

// waitServed polls, every 5 ms, until the node answers 200 for route i's
// host and path.
func waitServed(ctx context.Context, b *testing.B, addr string, i int, path string) {
	b.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + net.JoinHostPort(addr, strconv.Itoa(listenerPort)) + path
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		req.Host = name(i) + ".example"
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		b.Fatalf("route %d's path %s never served: %v", i, path, err)
	}
}

func waitReadyNode(ctx context.Context, srv *harness.APIServer) (string, error) {
	client, err := srv.Client()
	if err != nil {
		return "", err
	}
	var node string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) == 0 {
			return false, nil
		}
		for _, c := range nodes.Items[0].Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				node = nodes.Items[0].Name
				return true, nil
			}
		}
		return false, nil
	})
	return node, err
}

func rss(b *testing.B, srv *harness.APIServer) map[string]int {
	st, err := harness.ProcStatus(srv.PID())
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// liveHeap is the process's live heap at its last collection
// (go_gc_heap_live_bytes of the API server's /metrics: one process).
func liveHeap(ctx context.Context, b *testing.B, srv *harness.APIServer) float64 {
	client := srv.MustClient(b)
	data, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "go_gc_heap_live_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	b.Fatal("no go_gc_heap_live_bytes in /metrics")
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
