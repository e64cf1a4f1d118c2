// Package scheduling measures how fast a control plane turns Deployments
// into Pods bound to nodes: the controller manager's deployment and
// replicaset controllers create the Pods, the scheduler binds them. It runs
// `kubeboot server` (one process, embedded etcd) and, with -peer, in every
// iteration right after it, the peer control plane it replaces: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler 1.37.2 built
// from the module graph, four processes.
//
//	go test ./bench/scheduling -run '^$' -bench . -benchtime 1x -args -peer
//
// The nodes are Node objects the benchmark registers (Ready, 110 Pods
// each) and keeps alive by renewing their Leases, as kubelets do; nothing
// runs the Pods. A Pod counts as bound once the watch shows its nodeName.
//
//   - BenchmarkDeployment3: 10 Deployments of 3 replicas, one after the
//     other, on one node: the median time from the create to all 3 bound.
//
//   - BenchmarkDeployment1000: one Deployment of 1,000 replicas on 100
//     nodes: the time from the create to all bound, and the CPU all the
//     control plane's processes spent meanwhile. With upstream's defaults
//     the peer's controller manager's 20 requests/s pace it (kubeboot's
//     in-process components allow 200/s and 1,000/s); -qps sets the
//     components' limits in both control planes:
//
//     go test ./bench/scheduling -run '^$' -bench 1000 -benchtime 1x -args -peer -qps 500
package scheduling

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

var (
	peer = flag.Bool("peer", false, "also run the peer control plane in every iteration and report the ratio")
	// The components' clients allow 20 (controller manager) and 50
	// (scheduler) requests/s by default (--kube-api-qps), which pace the
	// ReplicaSet controller's Pod creates and the scheduler's bindings in
	// both control planes; -qps raises both limits in both to measure the
	// rest.
	qps = flag.Int("qps", 0, "--kube-api-qps (and twice that as --kube-api-burst) of the controller manager and the scheduler of both control planes; 0 keeps upstream's defaults")
)

// components are the -qps flags of the controller manager and the
// scheduler.
func components() benchserver.Components {
	if *qps == 0 {
		return benchserver.Components{}
	}
	limits := benchserver.ClientLimits(*qps)
	return benchserver.Components{ControllerManager: limits, Scheduler: limits}
}

func TestMain(m *testing.M) { harness.Main(m) }

// controlPlane is one control plane under test.
type controlPlane struct {
	config *rest.Config
	pids   []int
	stop   func()
}

// startKubeboot starts `kubeboot server` and waits until its controller
// manager and scheduler lead.
func startKubeboot(b *testing.B, kubeboot benchserver.Kubeboot) controlPlane {
	srv := kubeboot.Start(b)
	cfg, err := srv.Config()
	if err != nil {
		b.Fatal(err)
	}
	waitLeading(b, cfg)
	return controlPlane{config: cfg, pids: []int{srv.PID()}, stop: func() { benchserver.Stop(b, srv, 30*time.Second) }}
}

func startPeer(b *testing.B, plane benchserver.PeerControlPlane) controlPlane {
	p := plane.Start(b)
	return controlPlane{config: p.Config, pids: p.PIDs(), stop: func() {}}
}

func waitLeading(b *testing.B, cfg *rest.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := harness.WaitLeading(ctx, clientFor(b, cfg)); err != nil {
		b.Fatal(err)
	}
}

func clientFor(b *testing.B, cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return client
}

func BenchmarkDeployment3(b *testing.B) {
	benchmark(b, func(b *testing.B, client kubernetes.Interface, _ []int) result {
		startNodes(b, client, 1)
		var rs, created, bound []float64
		for i := range 10 {
			st, _ := timeToBound(b, client, fmt.Sprintf("web-%d", i), 3, nil)
			rs, created, bound = append(rs, ms(st.replicaSet)), append(created, ms(st.created)), append(bound, ms(st.bound))
		}
		b.Logf("median ms from the create: ReplicaSet %.1f, Pods created %.1f, bound %.1f", median(rs), median(created), median(bound))
		return result{"bound-ms", median(bound), 0}
	})
}

func BenchmarkDeployment1000(b *testing.B) {
	benchmark(b, func(b *testing.B, client kubernetes.Interface, pids []int) result {
		startNodes(b, client, 100)
		st, cpu := timeToBound(b, client, "web", 1000, pids)
		b.Logf("from the create: ReplicaSet %s, Pods created %s, bound %s", st.replicaSet, st.created, st.bound)
		return result{"bound-s", st.bound.Seconds(), cpu.Seconds()}
	})
}

// result is one control plane's figures in one iteration.
type result struct {
	unit  string
	value float64
	cpu   float64 // seconds; 0 if not measured
}

// benchmark runs measure on kubeboot and, with -peer, on the peer in every
// iteration, and reports the medians and kubeboot's ratios to the peer.
func benchmark(b *testing.B, measure func(*testing.B, kubernetes.Interface, []int) result) {
	kubeboot := benchserver.Server(b, time.Minute, components())
	var peerControlPlane benchserver.PeerControlPlane
	if *peer {
		peerControlPlane = benchserver.BuildPeerControlPlane(b, components())
	}
	var ours, theirs []result
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cp := startKubeboot(b, kubeboot)
		b.StartTimer()
		ours = append(ours, measure(b, clientFor(b, cp.config), cp.pids))
		b.StopTimer()
		cp.stop()
		if *peer {
			cp := startPeer(b, peerControlPlane)
			theirs = append(theirs, measure(b, clientFor(b, cp.config), cp.pids))
			cp.stop()
		}
	}
	report(b, "", ours)
	if *peer {
		report(b, "peer-", theirs)
		b.ReportMetric(medianOf(ours, resultValue)/medianOf(theirs, resultValue), "time-ratio")
		if ours[0].cpu > 0 {
			b.ReportMetric(medianOf(ours, resultCPU)/medianOf(theirs, resultCPU), "cpu-ratio")
		}
	}
}

func report(b *testing.B, prefix string, rs []result) {
	b.ReportMetric(medianOf(rs, resultValue), prefix+rs[0].unit)
	if rs[0].cpu > 0 {
		b.ReportMetric(medianOf(rs, resultCPU), prefix+"cpu-s")
	}
}

func resultValue(r result) float64 { return r.value }
func resultCPU(r result) float64   { return r.cpu }

func medianOf(rs []result, f func(result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stages are the times from a Deployment's create until the informers show
// its ReplicaSet, all its Pods created, and all its Pods bound.
type stages struct{ replicaSet, created, bound time.Duration }

// timeToBound creates a Deployment of replicas in the default namespace
// and returns when informers showed each stage, and the CPU the processes
// pids spent until the last. (Informers, not bare watches: an apiserver
// closes a watch whose reader falls behind a burst, and the informer
// lists again.)
func timeToBound(b *testing.B, client kubernetes.Interface, name string, replicas int32, pids []int) (stages, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	labels := map[string]string{"app": name}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(metav1.NamespaceDefault),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + name }))
	var (
		mu             sync.Mutex
		start          time.Time
		st             stages
		created, bound = map[string]bool{}, map[string]bool{}
		done           = make(chan struct{})
	)
	seen := func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		switch o := obj.(type) {
		case *appsv1.ReplicaSet:
			if st.replicaSet == 0 {
				st.replicaSet = time.Since(start)
			}
		case *corev1.Pod:
			if created[o.Name] = true; len(created) == int(replicas) && st.created == 0 {
				st.created = time.Since(start)
			}
			if o.Spec.NodeName != "" && !bound[o.Name] {
				if bound[o.Name] = true; len(bound) == int(replicas) {
					st.bound = time.Since(start)
					close(done)
				}
			}
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}
	for _, informer := range []cache.SharedIndexInformer{factory.Core().V1().Pods().Informer(), factory.Apps().V1().ReplicaSets().Informer()} {
		if _, err := informer.AddEventHandler(handler); err != nil {
			b.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown() // waits for the informers, which ctx stops
	}()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			b.Fatalf("the informer of %v did not sync", typ)
		}
	}
	cpuBefore := benchserver.CPUOf(b, pids...)
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	if _, err := client.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("%s: %d of %d Pods bound after %s", name, len(bound), replicas, time.Since(start))
	}
	cpu := benchserver.CPUOf(b, pids...) - cpuBefore
	mu.Lock()
	defer mu.Unlock()
	return st, cpu
}

// nodeHeartbeat is how often the benchmark renews each node's Lease, as a
// kubelet does (every 10 s, a quarter of the 40 s lease).
const nodeHeartbeat = 10 * time.Second

// startNodes registers n Ready nodes and renews their Leases until the
// benchmark ends.
func startNodes(b *testing.B, client kubernetes.Interface, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	for i := range n {
		name := fmt.Sprintf("node-%03d", i)
		node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		now := metav1.Now()
		// The controller manager's node controllers update new nodes too.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node.Status.Capacity, node.Status.Allocatable = capacity, capacity
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
			_, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				if latest, getErr := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); getErr == nil {
					node = latest
				}
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now.Time}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if updated, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{}); err == nil {
				lease = updated
			}
		}, nodeHeartbeat)
	}
	// The scheduler binds only to nodes it has seen Ready and untainted.
	waitSchedulable(b, client, n)
}

// waitSchedulable waits until n nodes are Ready without taints.
func waitSchedulable(b *testing.B, client kubernetes.Interface, n int) {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range nodes.Items {
			if len(node.Spec.Taints) == 0 {
				ready++
			}
		}
		return ready == n, nil
	})
	if err != nil {
		b.Fatalf("waiting for %d untainted nodes: %v", n, err)
	}
}
