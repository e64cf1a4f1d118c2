package nodes

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/internal/components/simulatednodes"
)

var (
	initPods    = flag.Int("init-pods", 1000, "BenchmarkScheduling: Pods scheduled before the measured ones")
	measurePods = flag.Int("measure-pods", 10000, "BenchmarkScheduling: Pods whose scheduling is measured")
	runPods     = flag.Bool("run-pods", false, "BenchmarkScheduling: the simulated kubelets run the Pods bound (scheduler_perf's nodes have no kubelets)")
)

// creators is how many clients create BenchmarkScheduling's Pods at once:
// enough that creation outpaces the scheduler (the figures log both).
const creators = 32

// BenchmarkScheduling is scheduler_perf's SchedulingBasic on -nodes
// simulated nodes: -init-pods Pods of its default template (a pause
// container requesting 100m CPU and 500Mi) are scheduled first, then
// -measure-pods more are created as fast as the API server takes them,
// and the figure is those Pods over the time from their first create
// until the last is bound. Upstream's CI requires 680 Pods/s of its
// 5000Nodes_10000Pods workload (apiserver, etcd and the scheduler alone,
// its nodes without kubelets); here the controller manager and the other
// components run too. As on scheduler_perf's nodes, a Pod bound stays
// Pending: the Pods carry kubeboot's custom-status annotation, so the
// simulated kubelets leave them be. With -run-pods they run every Pod
// bound, in the same process. With -peer each iteration also runs the
// peer control plane with the simulator, as BenchmarkRunning does.
//
//	go test ./bench/nodes -run '^$' -bench Scheduling -benchtime 1x -timeout 30m -v -args -nodes 5000
func BenchmarkScheduling(b *testing.B) {
	ours, theirs := eachControlPlane(b, func(name string, client kubernetes.Interface, pids []int) float64 {
		return scheduling(b, name, client, pids)
	})
	if *kubeboot {
		b.ReportMetric(benchserver.Median(ours), "pods/s")
	}
	if *peer {
		b.ReportMetric(benchserver.Median(theirs), "peer-pods/s")
	}
	if *kubeboot && *peer {
		b.ReportMetric(benchserver.Median(ours)/benchserver.Median(theirs), "ratio")
	}
}

// scheduling schedules *initPods Pods, then times *measurePods more from
// their first create until every one is bound, and returns their Pods/s.
func scheduling(b *testing.B, name string, client kubernetes.Interface, pids []int) float64 {
	bound := watchPods(b, client, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	createAndBind := func(prefix string, n, before int) (created, took time.Duration) {
		began := time.Now()
		benchserver.Creates(b, n, creators, func(i int) error {
			_, err := client.CoreV1().Pods(namespace).Create(context.Background(), schedulingPod(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{})
			return err
		})
		created = time.Since(began)
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Minute, true, func(context.Context) (bool, error) {
			return bound.Load() >= int64(before+n), nil
		}); err != nil {
			b.Fatalf("%s: %d of %d Pods bound: %v", name, bound.Load()-int64(before), n, err)
		}
		return created, time.Since(began)
	}
	createAndBind("init", *initPods, 0)
	cpu0 := benchserver.CPUOf(b, pids...)
	b.StartTimer()
	created, took := createAndBind("pod", *measurePods, *initPods)
	b.StopTimer()
	cpu := benchserver.CPUOf(b, pids...) - cpu0
	rate := float64(*measurePods) / took.Seconds()
	b.Logf("%s: %d Pods on %d nodes (after %d; run by the simulated kubelets: %t) created in %s, all bound after %s: %.0f Pods/s; CPU %s; RSS %.0f MiB",
		name, *measurePods, *nodes, *initPods, *runPods, created.Round(time.Millisecond), took.Round(time.Millisecond), rate,
		cpu.Round(time.Millisecond), benchserver.MemoryOf(b, pids...).RSS)
	return rate
}

// schedulingPod is scheduler_perf's default Pod template (its
// templates/pod-default.yaml) named name, left to the simulated kubelets
// with -run-pods.
func schedulingPod(name string) *corev1.Pod {
	resources := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}
	var annotations map[string]string
	if !*runPods {
		annotations = map[string]string{simulatednodes.CustomStatusAnnotation: simulatednodes.CustomStatusValue}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: "registry.k8s.io/pause:3.10.2",
			Ports:     []corev1.ContainerPort{{ContainerPort: 80}},
			Resources: corev1.ResourceRequirements{Requests: resources, Limits: resources},
		}}},
	}
}
