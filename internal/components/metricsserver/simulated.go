package metricsserver

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/metrics-server/pkg/scraper/client"
	"sigs.k8s.io/metrics-server/pkg/storage"

	"github.com/kubeboot/kubeboot/internal/platform/simulated"
)

// The annotations of kwok's usage-from-annotation ClusterResourceUsage
// (kwok's metrics-usage manifests): each container of a Pod with them
// uses that much CPU (a rate, in cores) and memory (a working set).
const (
	CPUAnnotation    = "kwok.x-k8s.io/usage-cpu"
	MemoryAnnotation = "kwok.x-k8s.io/usage-memory"
)

// What a container uses without the annotations, as in kwok's manifests.
var (
	defaultCPU    = resource.MustParse("1m")
	defaultMemory = resource.MustParse("1Mi")
)

// sources is where metrics-server's scraper takes each node's metrics
// from: the kubelet's /metrics/resource, or for a simulated node the
// simulation.
type sources struct {
	kubelets, simulated client.KubeletMetricsGetter
}

// GetMetrics implements client.KubeletMetricsGetter.
func (s *sources) GetMetrics(ctx context.Context, node *corev1.Node) (*storage.MetricsBatch, error) {
	if simulated.Node(node.Annotations) {
		return s.simulated.GetMetrics(ctx, node)
	}
	return s.kubelets.GetMetrics(ctx, node)
}

// simulatedNodes are the resource metrics of simulated nodes, as a
// kubelet would report them: each Running Pod's containers use what its
// annotations declare (kwok's defaults without), and a node what its
// Pods use. CPU is reported as the kubelet does, as CPU time used since
// the container (or node) started, which metrics-server turns back into
// a rate over its window: it accumulates here at the declared rate, so a
// changed annotation changes the rate from then on.
type simulatedNodes struct {
	pods cache.Indexer // by nodeNameIndex
	now  func() time.Time

	mu    sync.Mutex
	nodes map[string]*nodeCPU
	// invalid remembers the Pods whose annotations were logged as
	// invalid, by UID and value, to log each once.
	invalid map[string]bool
}

// nodeCPU is the CPU time a simulated node and its containers have used.
type nodeCPU struct {
	node       cpuTime
	containers map[containerRef]*cpuTime
}

// containerRef names a container of a Pod.
type containerRef struct {
	pod  types.UID
	name string
}

// cpuTime is CPU time used until at.
type cpuTime struct {
	at   time.Time
	used float64 // nanocore-seconds
}

// add accounts for rate (nanocores) from t.at until now.
func (t *cpuTime) add(rate int64, now time.Time) uint64 {
	if now.After(t.at) {
		t.used += float64(rate) * now.Sub(t.at).Seconds()
		t.at = now
	}
	return uint64(math.Round(t.used))
}

func newSimulatedNodes(pods cache.Indexer, now func() time.Time) *simulatedNodes {
	return &simulatedNodes{pods: pods, now: now, nodes: map[string]*nodeCPU{}, invalid: map[string]bool{}}
}

// GetMetrics implements client.KubeletMetricsGetter.
func (s *simulatedNodes) GetMetrics(ctx context.Context, node *corev1.Node) (*storage.MetricsBatch, error) {
	objs, err := s.pods.ByIndex(nodeNameIndex, node.Name)
	if err != nil {
		return nil, err
	}
	now := s.now()
	batch := &storage.MetricsBatch{
		Nodes: map[string]storage.MetricsPoint{},
		Pods:  map[types.NamespacedName]storage.PodMetricsPoint{},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cpu := s.nodes[node.Name]
	if cpu == nil {
		cpu = &nodeCPU{node: cpuTime{at: node.CreationTimestamp.Time}, containers: map[containerRef]*cpuTime{}}
		s.nodes[node.Name] = cpu
	}
	seen := make(map[containerRef]bool, len(cpu.containers))
	var nodeRate, nodeMemory int64
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if pod.Status.Phase != corev1.PodRunning {
			continue
		}
		rate, memory, err := s.usage(ctx, pod)
		if err != nil {
			continue
		}
		point := storage.PodMetricsPoint{Containers: make(map[string]storage.MetricsPoint, len(pod.Spec.Containers))}
		for _, c := range pod.Spec.Containers {
			ref := containerRef{pod: pod.UID, name: c.Name}
			seen[ref] = true
			started := containerStarted(pod, c.Name)
			t := cpu.containers[ref]
			if t == nil {
				t = &cpuTime{at: started}
				cpu.containers[ref] = t
			}
			point.Containers[c.Name] = storage.MetricsPoint{StartTime: started, Timestamp: now,
				CumulativeCPUUsed: t.add(rate, now), MemoryUsage: uint64(memory)}
			nodeRate += rate
			nodeMemory += memory
		}
		batch.Pods[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = point
	}
	for ref := range cpu.containers {
		if !seen[ref] {
			delete(cpu.containers, ref)
		}
	}
	batch.Nodes[node.Name] = storage.MetricsPoint{StartTime: node.CreationTimestamp.Time, Timestamp: now,
		CumulativeCPUUsed: cpu.node.add(nodeRate, now), MemoryUsage: uint64(nodeMemory)}
	return batch, nil
}

// usage is what each container of pod uses: CPU in nanocores and memory
// in bytes. Annotations that are not quantities are logged, once for
// each value, and the Pod is left out of the metrics, as kwok leaves out
// a Pod whose usage expression fails.
func (s *simulatedNodes) usage(ctx context.Context, pod *corev1.Pod) (cpu, memory int64, _ error) {
	c, m := defaultCPU, defaultMemory
	for _, a := range []struct {
		name string
		q    *resource.Quantity
	}{{CPUAnnotation, &c}, {MemoryAnnotation, &m}} {
		v, ok := pod.Annotations[a.name]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err == nil && q.Sign() < 0 {
			err = fmt.Errorf("negative")
		}
		if err != nil {
			if key := string(pod.UID) + "/" + a.name + "=" + v; !s.invalid[key] {
				s.invalid[key] = true
				klog.FromContext(ctx).Error(err, "A simulated Pod's usage annotation is not a quantity; the Pod has no resource metrics",
					"pod", klog.KObj(pod), "annotation", a.name, "value", v)
			}
			return 0, 0, err
		}
		*a.q = q
	}
	return c.ScaledValue(resource.Nano), m.Value(), nil
}

// containerStarted is when the container started running, as its
// status says; else when the Pod started.
func containerStarted(pod *corev1.Pod, name string) time.Time {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == name && st.State.Running != nil && !st.State.Running.StartedAt.IsZero() {
			return st.State.Running.StartedAt.Time
		}
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}
