// Package nodes measures `kubeboot server --simulated-nodes`: how long
// Deployments take to have every Pod Running on simulated nodes, the CPU
// the process spends on it and its memory, and what idle simulated nodes
// cost.
//
//	go test ./bench/nodes -run '^$' -bench . -benchtime 1x -timeout 60m
//	go test ./bench/nodes -run '^$' -bench Running -benchtime 1x -args -nodes 100 -pods 3000
//
// BenchmarkRunning creates -pods/-replicas Deployments of -replicas on
// -nodes nodes and waits, through an informer, until every Pod is Running
// and Ready. Upstream's scheduler client limit (--kube-api-qps 50, burst
// 100) would set the peer's pace at 50 bindings/s; -scheduler-qps sets
// both control planes' (the default here, 1000, is kubeboot's in-process
// default, what a cluster built for this load would set).
//
// With -cpuprofile FILE, BenchmarkRunning (and BenchmarkScheduling) also
// takes a CPU profile of the server for -profile-for from -profile-after
// after its nodes are Ready, just before the load starts, writes it to
// FILE and logs each component's share of it (the goroutines' cpulabels):
//
//	go test ./bench/nodes -run '^$' -bench Running -benchtime 1x -v -args -nodes 200 -pods 6000 -cpuprofile /tmp/cpu.pprof
//
// With -peer, every iteration of BenchmarkRunning also runs the same load
// on the control plane kubeboot replaces: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler 1.37.2 built from the module
// graph, with the same kwok code and stages driving the nodes from a
// process of their own (./simulator), and the same client limits (the
// controller manager's in-process 200/s, burst 400; -scheduler-qps). CPU
// and RSS are summed over every process, the simulator's included. At
// 30,000 Pods the pair takes over half an hour; -kubeboot=false -peer runs
// the peer alone, right after a run without -peer, to split it in two.
//
// BenchmarkIdle runs -nodes nodes with no Pods for -idle and reports the
// process's CPU per node, its RSS, the etcd writes per second (the
// apiserver's etcd_requests_total for create and update) and the p99 of
// 200 `get pod`s.
//
// BenchmarkFlatCost compares the CPU per Pod at 200 nodes / 6,000 Pods
// with 50 / 1,500 (flat_test.go).
//
// BenchmarkScheduling is scheduler_perf's SchedulingBasic: -init-pods
// Pods, then -measure-pods timed from their first create until the last
// is bound, on -nodes nodes (scheduling_test.go).
//
//	go test ./bench/nodes -run '^$' -bench Scheduling -benchtime 1x -timeout 30m -args -nodes 5000
//
// BenchmarkTop runs -nodes nodes, waits until the resource metrics API
// has every node's usage, then reports the median and p99 of listing
// every NodeMetrics (the API `kubectl top nodes` reads) and the median of
// `kubectl top nodes` itself (a process, its discovery included).
//
//	go test ./bench/nodes -run '^$' -bench Top -benchtime 20x
package nodes

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

var (
	nodes        = flag.Int("nodes", 1000, "simulated nodes")
	pods         = flag.Int("pods", 30000, "Pods in all (BenchmarkRunning)")
	replicas     = flag.Int("replicas", 30, "replicas of each Deployment (BenchmarkRunning)")
	schedulerQPS = flag.Int("scheduler-qps", 1000, "the scheduler's --kube-api-qps (twice that as burst)")
	idle         = flag.Duration("idle", time.Minute, "how long BenchmarkIdle watches idle nodes")
	peer         = flag.Bool("peer", false, "BenchmarkRunning: also run the peer control plane with kwok in every iteration")
	kubeboot     = flag.Bool("kubeboot", true, "BenchmarkRunning: run kubeboot (-kubeboot=false -peer: the peer alone, right after a kubeboot-only run)")
	settledHeap  = flag.Bool("settled-heap", false, "BenchmarkRunning, BenchmarkScheduling: after the load, restart the server and log its live heap again")
	serverArgs   = flag.String("server-args", "", "more flags for kubeboot server, separated by spaces (to try a setting)")
	perNamespace = flag.Int("pods-per-namespace", 3000, "BenchmarkRunning: Pods in each namespace of the load "+
		"(SIG Scalability's namespace threshold, as ClusterLoader2's 100 nodes a namespace); 0 puts them all in default")
)

func TestMain(m *testing.M) { harness.Main(m) }

// server is a `kubeboot server` with the simulated nodes Ready.
type server struct {
	*harness.APIServer
	client kubernetes.Interface
	// socket is the server's --debug-socket-path: its profiles and heap.
	socket string
	// kubeboot is how it was started, to restart it.
	kubeboot benchserver.Kubeboot
	nodes    int
}

func start(b testing.TB, nodes int, args ...string) server {
	socket := filepath.Join(b.TempDir(), "debug.sock")
	k := benchserver.Server(b, time.Minute, loadComponents(),
		// Node IPAM's range is the default's, or --simulated-node-cidr's
		// (16,384 nodes) beyond the default's 256, as a user gets it.
		slices.Concat([]string{fmt.Sprintf("--simulated-nodes=%d", nodes), "--debug-socket-path=" + socket}, strings.Fields(*serverArgs), args)...)
	return serve(b, k, k.Start(b), socket, nodes)
}

// restart stops s and starts it again on its data dir, its nodes Ready.
func (s server) restart(tb testing.TB) server {
	benchserver.Stop(tb, s.APIServer, time.Minute)
	return serve(tb, s.kubeboot, s.kubeboot.StartIn(tb, s.DataDir), s.socket, s.nodes)
}

// serve waits for srv's simulated nodes to be Ready; srv is stopped when
// tb ends, if the benchmark has not stopped it.
func serve(b testing.TB, k benchserver.Kubeboot, srv *harness.APIServer, socket string, nodes int) server {
	b.Cleanup(func() {
		select {
		case <-srv.Exited(): // stopped by the benchmark
		default:
			if err := srv.Terminate(time.Minute); err != nil {
				b.Error(err)
			}
		}
	})
	cfg, err := srv.Config()
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS = -1
	client := kubernetes.NewForConfigOrDie(cfg)
	began := time.Now()
	// The server fails the start itself once its nodes stop coming Ready.
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-srv.Exited():
			return false, fmt.Errorf("the server exited:\n%s", srv.Logs())
		default:
		}
		return strings.Contains(srv.Logs(), "Simulated nodes are ready"), nil
	}); err != nil {
		b.Fatalf("simulated nodes not ready: %v", err)
	}
	b.Logf("%d simulated nodes Ready %s after the server", nodes, time.Since(began).Round(time.Millisecond))
	return server{srv, client, socket, k, nodes}
}

// loadComponents are the flags both control planes get: the scheduler's
// client limits (-scheduler-qps), and a Service range that holds the
// load's Services (kube-apiserver's default, a /24, holds 254; this is
// kubeadm's).
func loadComponents() benchserver.Components {
	return benchserver.Components{
		APIServer: []string{"--service-cluster-ip-range=10.96.0.0/16"},
		Scheduler: benchserver.ClientLimits(*schedulerQPS),
	}
}

func BenchmarkRunning(b *testing.B) {
	ours, theirs := eachControlPlane(b, func(name string, client kubernetes.Interface, pids []int) figures {
		b.StartTimer()
		defer b.StopTimer()
		return running(b, name, client, pids, *nodes, *pods)
	})
	if *kubeboot {
		b.ReportMetric(ours[0].took.Seconds(), "running-s")
		b.ReportMetric(ours[0].cpu.Seconds(), "cpu-s")
		b.ReportMetric(ours[0].rss, "rss-MiB")
		b.ReportMetric(ours[0].requests.statusPatches/float64(ours[0].pods), "status-patches/pod")
	}
	if *peer {
		b.ReportMetric(theirs[0].took.Seconds(), "peer-running-s")
		b.ReportMetric(theirs[0].cpu.Seconds(), "peer-cpu-s")
		b.ReportMetric(theirs[0].rss, "peer-rss-MiB")
		b.ReportMetric(theirs[0].requests.statusPatches/float64(theirs[0].pods), "peer-status-patches/pod")
	}
	if *kubeboot && *peer {
		b.ReportMetric(ours[0].took.Seconds()/theirs[0].took.Seconds(), "time-ratio")
		b.ReportMetric(ours[0].cpu.Seconds()/theirs[0].cpu.Seconds(), "cpu-ratio")
		b.ReportMetric(ours[0].rss/theirs[0].rss, "rss-ratio")
	}
}

// eachControlPlane runs load, b.N times, on kubeboot's server (unless
// -kubeboot=false) with its nodes Ready and, with -peer, right after it on
// the peer control plane with the simulator's, and returns each one's
// results. The benchmark's timer is stopped; load starts it for what it
// measures.
func eachControlPlane[T any](b *testing.B, load func(name string, client kubernetes.Interface, pids []int) T) (ours, theirs []T) {
	var plane benchserver.PeerControlPlane
	var simulator string
	if *peer {
		plane, simulator = buildPeer(b)
	}
	for range b.N {
		b.StopTimer()
		if *kubeboot {
			srv, profile := startProfiled(b)
			if *settledHeap {
				// As costPerPod: the heap before the load once what
				// the nodes' registration left is gone.
				time.Sleep(settle)
			}
			before := srv.liveHeap(b)
			ours = append(ours, load("kubeboot", srv.client, []int{srv.PID()}))
			profile()
			if *settledHeap {
				srv.heap(b, before, true).log(b)
			} else {
				srv.heap(b, before, false).log(b)
				benchserver.Stop(b, srv.APIServer, time.Minute)
			}
		}
		if *peer {
			client, pids := startPeer(b, plane, simulator)
			theirs = append(theirs, load("peer", client, pids))
		}
	}
	return ours, theirs
}

// figures are one control plane's results in one iteration.
type figures struct {
	took, cpu time.Duration
	rss       float64 // MiB
	pods      int     // brought to Running and Ready
	// requests are the API server's counts over the load.
	requests apiCounts
}

// running creates pods/*replicas Deployments and waits until every Pod
// is Running and Ready on the nodes; the CPU and RSS are the sums over
// pids.
func running(tb testing.TB, name string, client kubernetes.Interface, pids []int, nodes, pods int) figures {
	cpu0 := benchserver.CPUOf(tb, pids...)
	counts0 := readAPICounts(tb, client)
	began := time.Now()
	counted := watchPods(tb, client, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podutil.IsPodReady(p) })
	deployments := pods / *replicas
	createDeployments(tb, client, loadNamespaces(tb, client, deployments), deployments)
	created := time.Since(began)
	want := int64(deployments * *replicas)
	// A load of 150,000 Pods takes an hour on two cores: the wait fails
	// only once runningStall passes without a Pod more Running, and says on
	// stderr every progressPeriod how far it is (a benchmark's log comes
	// at its end).
	last, progressed := int64(-1), time.Now()
	report := time.NewTicker(progressPeriod)
	defer report.Stop()
	if err := wait.PollUntilContextCancel(context.Background(), 100*time.Millisecond, true, func(context.Context) (bool, error) {
		n := counted.Load()
		if n > last {
			last, progressed = n, time.Now()
		}
		select {
		case <-report.C:
			mem, err := benchserver.ReadMemory(pids...)
			if err != nil {
				return false, fmt.Errorf("a process of the control plane is gone: %w", err)
			}
			fmt.Fprintf(os.Stderr, "%s: %d of %d Pods Running and Ready after %s, RSS %.0f MiB\n",
				name, n, want, time.Since(began).Round(time.Second), mem.RSS)
		default:
		}
		if n >= want {
			return true, nil
		}
		if stalled := time.Since(progressed); stalled > runningStall {
			return false, fmt.Errorf("none more for %s", stalled.Round(time.Second))
		}
		return false, nil
	}); err != nil {
		tb.Fatalf("%s: %d of %d Pods Running and Ready: %v", name, counted.Load(), want, err)
	}
	f := figures{took: time.Since(began), pods: int(want)}
	f.cpu = benchserver.CPUOf(tb, pids...) - cpu0
	mem := benchserver.MemoryOf(tb, pids...)
	f.rss = mem.RSS
	f.requests = readAPICounts(tb, client).minus(counts0)
	n := float64(f.pods)
	tb.Logf("%s: %d Deployments created in %s; %d Pods Running and Ready on %d nodes after %s; CPU %s; RSS %.0f MiB (peak %.0f, summed over the processes); "+
		"per Pod: %.2f status patches, %.2f etcd writes; %.0f Pod lists; %.0f Pod watchers cut off",
		name, deployments, created.Round(time.Millisecond), f.pods, nodes, f.took.Round(time.Millisecond), f.cpu.Round(time.Millisecond), f.rss, mem.Peak,
		f.requests.statusPatches/n, f.requests.etcdWrites/n, f.requests.lists, f.requests.cutOff)
	return f
}

// runningStall bounds how long BenchmarkRunning's load may go without a
// Pod more Running and Ready; progressPeriod is how often it reports.
const (
	runningStall   = 5 * time.Minute
	progressPeriod = time.Minute
)

// buildPeer builds the peer control plane, with the client limits
// kubeboot's components have (the controller manager's in-process 200/s;
// -scheduler-qps), and the simulator.
func buildPeer(b *testing.B) (benchserver.PeerControlPlane, string) {
	components := loadComponents()
	components.ControllerManager = benchserver.ClientLimits(200)
	plane := benchserver.BuildPeerControlPlane(b, components)
	simulator, err := harness.BuildCommand(filepath.Join(b.TempDir(), "simulator"), "github.com/kubeboot/kubeboot/bench/nodes/simulator")
	if err != nil {
		b.Fatal(err)
	}
	return plane, simulator
}

// startPeer starts the peer control plane and the simulator against it,
// and returns once the nodes are Ready: an admin client and every
// process's PID.
func startPeer(b *testing.B, plane benchserver.PeerControlPlane, simulator string) (kubernetes.Interface, []int) {
	cp := plane.Start(b)
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS = -1
	cmd := exec.Command(simulator, "-server", cfg.Host, "-token", cfg.BearerToken, fmt.Sprintf("-nodes=%d", *nodes))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	began := time.Now()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		b.Fatalf("simulator: %q, %v", line, err)
	}
	b.Logf("peer: %d simulated nodes Ready %s after the control plane", *nodes, time.Since(began).Round(time.Millisecond))
	return kubernetes.NewForConfigOrDie(cfg), append(cp.PIDs(), cmd.Process.Pid)
}

func BenchmarkIdle(b *testing.B) {
	for range b.N {
		b.StopTimer()
		srv := start(b, *nodes)
		// Let the start settle: the first heartbeats and lease creates.
		time.Sleep(10 * time.Second)
		counts0 := readAPICounts(b, srv.client)
		cpu0 := benchserver.CPUOf(b, srv.PID())
		b.StartTimer()
		time.Sleep(*idle)
		b.StopTimer()
		spent := benchserver.CPUOf(b, srv.PID()) - cpu0
		writes := readAPICounts(b, srv.client).minus(counts0).etcdWrites
		p99 := getPodP99(b, srv.client)
		rss := benchserver.MemoryOf(b, srv.PID()).RSS
		perNode := time.Duration(float64(spent) / idle.Seconds() / float64(*nodes))
		b.Logf("%d idle nodes for %s: CPU %s (%s per node per second), %.1f etcd writes/s, RSS %.0f MiB, get pod p99 %s",
			*nodes, *idle, spent.Round(time.Millisecond), perNode, writes/idle.Seconds(), rss, p99.Round(10*time.Microsecond))
		b.ReportMetric(float64(perNode.Microseconds()), "cpu-us/node/s")
		b.ReportMetric(writes/idle.Seconds(), "etcd-writes/s")
		b.ReportMetric(rss, "rss-MiB")
		b.ReportMetric(float64(p99.Microseconds())/1000, "get-p99-ms")
	}
}

// loadNamespaces creates the namespaces n Deployments of *replicas are
// spread over, -pods-per-namespace Pods' worth each, and returns, in
// order, the namespace of each Deployment. Kubernetes' own scalability
// tests keep to 3,000 Pods a namespace (SIG Scalability's thresholds;
// ClusterLoader2's load puts 100 nodes' worth in each), and upstream's
// code lists by namespace: the Deployment controller its ReplicaSets on
// every sync, the endpoints controllers its Pods for every Service, the
// scheduler's default spreading its Pods on every node scored. One
// namespace of 150,000 Pods measures those lists, not the cluster's size.
func loadNamespaces(tb testing.TB, client kubernetes.Interface, n int) []string {
	each := n
	if *perNamespace > 0 {
		each = max(1, *perNamespace / *replicas)
	}
	var names []string
	for i := range n {
		name := metav1.NamespaceDefault
		if *perNamespace > 0 {
			name = fmt.Sprintf("load-%d", i/each)
		}
		if i%each == 0 && name != metav1.NamespaceDefault {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if _, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
				tb.Fatal(err)
			}
		}
		names = append(names, name)
	}
	return names
}

// createDeployments creates n Deployments of *replicas, the i-th in
// namespaces[i], 16 at a time, and a Service for every other one, as
// ClusterLoader2's load does (half as many Services as Deployments, each
// selecting the Pods of one).
func createDeployments(b testing.TB, client kubernetes.Interface, namespaces []string, n int) {
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			labels := map[string]string{"app": fmt.Sprintf("web-%d", i)}
			if i%2 == 0 {
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: labels["app"]},
					Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
				}
				if _, err := client.CoreV1().Services(namespaces[i]).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: labels["app"]},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To(int32(*replicas)),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
					},
				},
			}
			_, err := client.AppsV1().Deployments(namespaces[i]).Create(context.Background(), d, metav1.CreateOptions{})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// namespace is where BenchmarkScheduling creates its Pods.
const namespace = metav1.NamespaceDefault

// watchPods counts the Pods an informer has seen in a state that has
// (once counted, a Pod stays counted). The benchmarks' control planes run
// no Pods but theirs.
func watchPods(b testing.TB, client kubernetes.Interface, has func(*corev1.Pod) bool) *atomic.Int64 {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	b.Cleanup(func() { cancel(); factory.Shutdown() })
	var n atomic.Int64
	counted := map[string]bool{} // the handler's calls are sequential
	update := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		key := p.Namespace + "/" + p.Name
		if counted[key] || !has(p) {
			return
		}
		counted[key] = true
		n.Add(1)
	}
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: update, UpdateFunc: func(_, obj any) { update(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("the Pod informer did not sync")
	}
	return &n
}

// getPodP99 is the 99th percentile of 200 GETs of one Pod.
func getPodP99(b *testing.B, client kubernetes.Interface) time.Duration {
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if _, err := client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for range 200 {
		began := time.Now()
		if _, err := client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "probe", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	return took[len(took)*99/100]
}

func BenchmarkTop(b *testing.B) {
	srv := start(b, *nodes, "--metrics-server-arg=--metric-resolution=15s")
	cfg, err := srv.Config()
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS = -1
	metrics := metricsclient.NewForConfigOrDie(cfg)
	ctx := context.Background()
	began := time.Now()
	var have int
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		have = len(list.Items)
		return have == *nodes, nil
	}); err != nil {
		b.Fatalf("metrics of %d of %d nodes: %v", have, *nodes, err)
	}
	b.Logf("metrics of every node %s after the nodes were Ready", time.Since(began).Round(time.Second))
	kubectl, err := harness.Kubectl()
	if err != nil {
		b.Fatal(err)
	}
	var lists, tops []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		list, err := metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != *nodes {
			b.Fatalf("NodeMetrics: %v (%d)", err, len(list.Items))
		}
		lists = append(lists, time.Since(start))
		start = time.Now()
		out, err := exec.Command(kubectl, "--kubeconfig", filepath.Join(srv.DataDir, "admin.kubeconfig"), "top", "nodes", "--no-headers").Output()
		if err != nil {
			b.Fatalf("kubectl top nodes: %v", err)
		}
		tops = append(tops, time.Since(start))
		if n := strings.Count(string(out), "\n"); n != *nodes {
			b.Fatalf("kubectl top nodes: %d lines, want %d", n, *nodes)
		}
	}
	b.StopTimer()
	slices.Sort(lists)
	slices.Sort(tops)
	b.ReportMetric(float64(lists[len(lists)/2].Microseconds())/1000, "ms-list-p50")
	b.ReportMetric(float64(lists[(len(lists)*99)/100].Microseconds())/1000, "ms-list-p99")
	b.ReportMetric(float64(tops[len(tops)/2].Microseconds())/1000, "ms-kubectl-top-p50")
}
