package kubescheduler

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	plugintesting "k8s.io/kubernetes/pkg/scheduler/framework/plugins/testing"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// spreadArgs is the PodTopologySpread configuration of the default
// profile withDefaults gives, which upstream's validation accepts.
func spreadArgs(t *testing.T, hostnameSpreading bool) *config.PodTopologySpreadArgs {
	t.Helper()
	if err := Validate(NewOptions(), hostnameSpreading); err != nil {
		t.Fatalf("kube-scheduler's validation: %v", err)
	}
	o, err := withDefaults(NewOptions(), hostnameSpreading)
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range o.ComponentConfig.Profiles[0].PluginConfig {
		if pc.Name == names.PodTopologySpread {
			return pc.Args.(*config.PodTopologySpreadArgs)
		}
	}
	t.Fatal("the default profile has no PodTopologySpread arguments")
	return nil
}

// spreadScores are upstream's PodTopologySpread plugin's normalized scores,
// configured with args, for a new Pod of a ReplicaSet that already has
// Pods on some of nodes, scored on every node.
func spreadScores(t *testing.T, args *config.PodTopologySpreadArgs, nodes []*corev1.Node) map[string]int64 {
	t.Helper()
	schedmetrics.Register() // the plugin's parallelizer counts goroutines in them
	_, ctx := ktesting.NewTestContext(t)
	labels := map[string]string{"app": "web"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	owned := metav1.ObjectMeta{Namespace: "default", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}}
	var pods []*corev1.Pod
	for i, n := range nodes {
		// 0, 1, 2, 3, 0, 1, ... Pods of the ReplicaSet, and one of another.
		for k := range i % 4 {
			meta := *owned.DeepCopy()
			meta.Name = fmt.Sprintf("web-%d-%d", i, k)
			pods = append(pods, &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{NodeName: n.Name}})
		}
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i), Namespace: "default",
			Labels: map[string]string{"app": "other"}}, Spec: corev1.PodSpec{NodeName: n.Name}})
	}
	features := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	snapshot := cache.NewSnapshot(pods, nodes)
	pl := plugintesting.SetupPluginWithInformers(ctx, t, frameworkruntime.FactoryAdapter(features, podtopologyspread.New),
		args, snapshot, []runtime.Object{rs})
	plugin := pl.(*podtopologyspread.PodTopologySpread)

	pod := &corev1.Pod{ObjectMeta: *owned.DeepCopy()}
	pod.Name = "web-new"
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	if s := plugin.PreScore(ctx, state, pod, infos); !s.IsSuccess() {
		t.Fatalf("PreScore: %v", s)
	}
	var scores fwk.NodeScoreList
	for _, info := range infos {
		score, s := plugin.Score(ctx, state, pod, info)
		if !s.IsSuccess() {
			t.Fatalf("Score %s: %v", info.Node().Name, s)
		}
		scores = append(scores, fwk.NodeScore{Name: info.Node().Name, Score: score})
	}
	if s := plugin.NormalizeScore(ctx, state, pod, scores); !s.IsSuccess() {
		t.Fatalf("NormalizeScore: %v", s)
	}
	byNode := map[string]int64{}
	for _, s := range scores {
		byNode[s.Name] = s.Score
	}
	return byNode
}

// nodes are n nodes as simulated nodes register, with zone labels from
// zones in turn when there are any.
func nodes(n int, zones ...string) []*corev1.Node {
	var nodes []*corev1.Node
	for i := range n {
		name := fmt.Sprintf("simulated-%d", i)
		labels := map[string]string{corev1.LabelHostname: name}
		if len(zones) > 0 {
			labels[corev1.LabelTopologyZone] = zones[i%len(zones)]
		}
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	}
	return nodes
}

// TestHostnameSpreadingScoresAsUpstreamsDefaults: on nodes without zone
// labels, the scheduler's spreading by hostname alone gives every node the
// score upstream's System defaults give it, and those scores spread the
// Pods (they differ between nodes). On zoned nodes they differ, which is
// why HostnameSpreading is only for nodes without zones.
func TestHostnameSpreadingScoresAsUpstreamsDefaults(t *testing.T) {
	system, hostname := spreadArgs(t, false), spreadArgs(t, true)
	if system.DefaultingType != config.SystemDefaulting {
		t.Fatalf("upstream's default spreading is %q, not System: HostnameSpreading needs a new look", system.DefaultingType)
	}

	zoneless := nodes(12)
	want, got := spreadScores(t, system, zoneless), spreadScores(t, hostname, zoneless)
	if !maps.Equal(got, want) {
		t.Errorf("on nodes without zones, spreading by hostname scores %v, upstream's defaults %v", got, want)
	}
	if values := slices.Compact(slices.Sorted(maps.Values(want))); len(values) < 2 {
		t.Errorf("every node scores %v: the Pods would not be spread, and the comparison shows nothing", values)
	}

	zoned := nodes(12, "a", "b", "b")
	if maps.Equal(spreadScores(t, hostname, zoned), spreadScores(t, system, zoned)) {
		t.Error("on zoned nodes, spreading by hostname scores as upstream's defaults: HostnameSpreading could be the default everywhere")
	}
}
