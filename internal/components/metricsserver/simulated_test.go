package metricsserver

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/metrics-server/pkg/storage"

	"github.com/kubeboot/kubeboot/internal/platform/simulated"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func simulatedNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0),
		Annotations: map[string]string{simulated.NodeAnnotation: simulated.NodeAnnotationValue}}}
}

// simulatedPod is a Running Pod on node, started at t0, with a container
// per name and annotations.
func simulatedPod(name, node string, annotations map[string]string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0}},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}})
	}
	return pod
}

func podIndexer(t *testing.T, pods ...*corev1.Pod) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{nodeNameIndex: podNodeName})
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// clock is a settable time.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// TestSimulatedUsage: a simulated node reports its Running Pods'
// containers using what their annotations declare (kwok's defaults
// without), as CPU time that grows at that rate, and itself the sum.
func TestSimulatedUsage(t *testing.T) {
	const millicore = 1_000_000 // nanocores
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		// want is each container's CPU rate (millicores) and memory
		// (bytes), by pod/container; absent pods are left out.
		want map[string][2]int64
	}{
		{
			name: "annotated",
			pods: []*corev1.Pod{simulatedPod("a", "n", map[string]string{CPUAnnotation: "250m", MemoryAnnotation: "64Mi"}, "web", "side")},
			want: map[string][2]int64{"a/web": {250, 64 << 20}, "a/side": {250, 64 << 20}},
		},
		{
			name: "kwok's defaults",
			pods: []*corev1.Pod{simulatedPod("a", "n", nil, "web")},
			want: map[string][2]int64{"a/web": {1, 1 << 20}},
		},
		{
			name: "whole cores, memory only defaulted",
			pods: []*corev1.Pod{simulatedPod("a", "n", map[string]string{CPUAnnotation: "2"}, "web")},
			want: map[string][2]int64{"a/web": {2000, 1 << 20}},
		},
		{
			name: "not a quantity: left out, the others kept",
			pods: []*corev1.Pod{
				simulatedPod("bad", "n", map[string]string{CPUAnnotation: "lots"}, "web"),
				simulatedPod("negative", "n", map[string]string{MemoryAnnotation: "-1Mi"}, "web"),
				simulatedPod("good", "n", map[string]string{CPUAnnotation: "100m"}, "web"),
			},
			want: map[string][2]int64{"good/web": {100, 1 << 20}},
		},
		{
			name: "only Running Pods, only this node's",
			pods: func() []*corev1.Pod {
				pending := simulatedPod("pending", "n", nil, "web")
				pending.Status.Phase = corev1.PodPending
				done := simulatedPod("done", "n", nil, "web")
				done.Status.Phase = corev1.PodSucceeded
				return []*corev1.Pod{pending, done, simulatedPod("elsewhere", "other", nil, "web"), simulatedPod("here", "n", nil, "web")}
			}(),
			want: map[string][2]int64{"here/web": {1, 1 << 20}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := &clock{now: t0.Add(30 * time.Second)}
			s := newSimulatedNodes(podIndexer(t, tc.pods...), now.Now)
			// Two scrapes 10 s apart: CPU time since the start, growing at
			// the rate.
			first, err := s.GetMetrics(context.Background(), simulatedNode("n"))
			if err != nil {
				t.Fatal(err)
			}
			now.now = now.now.Add(10 * time.Second)
			second, err := s.GetMetrics(context.Background(), simulatedNode("n"))
			if err != nil {
				t.Fatal(err)
			}
			var nodeRate, nodeMemory int64
			got := 0
			for ref, p := range second.Pods {
				for c, point := range p.Containers {
					got++
					key := ref.Name + "/" + c
					want, ok := tc.want[key]
					if !ok {
						t.Errorf("metrics for %s, want none", key)
						continue
					}
					nodeRate += want[0]
					nodeMemory += want[1]
					if !point.StartTime.Equal(t0) || !point.Timestamp.Equal(now.now) {
						t.Errorf("%s: start %v, timestamp %v, want %v and %v", key, point.StartTime, point.Timestamp, t0, now.now)
					}
					if want := uint64(want[0] * millicore * 40); point.CumulativeCPUUsed != want {
						t.Errorf("%s: CPU time %d ns·cores after 40 s, want %d", key, point.CumulativeCPUUsed, want)
					}
					before := first.Pods[ref].Containers[c].CumulativeCPUUsed
					if want := uint64(want[0] * millicore * 10); point.CumulativeCPUUsed-before != want {
						t.Errorf("%s: CPU time grew %d in 10 s, want %d", key, point.CumulativeCPUUsed-before, want)
					}
					if point.MemoryUsage != uint64(want[1]) {
						t.Errorf("%s: memory %d, want %d", key, point.MemoryUsage, want[1])
					}
				}
			}
			if got != len(tc.want) {
				t.Errorf("%d containers' metrics, want %d: %v", got, len(tc.want), second.Pods)
			}
			node := second.Nodes["n"]
			if want := uint64(nodeRate * millicore * 40); node.CumulativeCPUUsed != want || node.MemoryUsage != uint64(nodeMemory) {
				t.Errorf("node: CPU time %d, memory %d, want %d and %d", node.CumulativeCPUUsed, node.MemoryUsage, want, nodeMemory)
			}
		})
	}
}

// TestSimulatedUsageThroughStorage: metrics-server's own storage turns
// the simulated points into the usage declared, follows a changed
// annotation from the next window on, and forgets a Pod that is gone.
func TestSimulatedUsageThroughStorage(t *testing.T) {
	const resolution = 10 * time.Second
	pod := simulatedPod("a", "n", map[string]string{CPUAnnotation: "300m", MemoryAnnotation: "50Mi"}, "web")
	idx := podIndexer(t, pod)
	now := &clock{now: t0.Add(time.Minute)}
	s := newSimulatedNodes(idx, now.Now)
	store := storage.NewStorage(resolution)
	node := simulatedNode("n")
	scrape := func() {
		t.Helper()
		b, err := s.GetMetrics(context.Background(), node)
		if err != nil {
			t.Fatal(err)
		}
		store.Store(b)
		now.now = now.now.Add(resolution)
	}
	usage := func() (cpu, memory string) {
		t.Helper()
		ms, err := store.GetPodMetrics(metadata(pod))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || len(ms[0].Containers) != 1 {
			return "", ""
		}
		u := ms[0].Containers[0].Usage
		return u.Cpu().String(), u.Memory().String()
	}
	scrape()
	scrape()
	if cpu, mem := usage(); cpu != "300m" || mem != "50Mi" {
		t.Errorf("usage %s CPU, %s memory; want 300m and 50Mi", cpu, mem)
	}
	nodes, err := store.GetNodeMetrics(node)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("node metrics %v, %v", nodes, err)
	}
	if got := nodes[0].Usage.Cpu(); got.Cmp(resource.MustParse("300m")) != 0 {
		t.Errorf("node CPU %s, want 300m", got)
	}

	// The annotation lowered: the next window is at the new rate, and CPU
	// time never decreases (metrics-server drops a point that does).
	changed := pod.DeepCopy()
	changed.Annotations[CPUAnnotation] = "20m"
	if err := idx.Update(changed); err != nil {
		t.Fatal(err)
	}
	pod = changed
	scrape()
	if cpu, _ := usage(); cpu != "20m" {
		t.Errorf("usage after the annotation changed to 20m: %s", cpu)
	}

	if err := idx.Delete(pod); err != nil {
		t.Fatal(err)
	}
	scrape()
	if len(s.nodes["n"].containers) != 0 {
		t.Errorf("CPU time kept for containers gone: %v", s.nodes["n"].containers)
	}
}
