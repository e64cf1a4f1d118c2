package simulatednodes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

// lifecycles are kwok's lifecycles of stages byRef, by kind.
func lifecycles(t testing.TB, byRef map[internalversion.StageResourceRef][]*internalversion.Stage) map[string]lifecycle.Lifecycle {
	t.Helper()
	byKind := map[string]lifecycle.Lifecycle{}
	for ref, list := range byRef {
		lc, err := lifecycle.NewLifecycle(list)
		if err != nil {
			t.Fatal(err)
		}
		byKind[ref.Kind] = lc
	}
	return byKind
}

// kwokLifecycles are the lifecycles of kwok's default stages as kwok
// ships them, with their JQ selectors.
func kwokLifecycles(t testing.TB) map[string]lifecycle.Lifecycle {
	t.Helper()
	byRef := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, raw := range kwokStages {
		s, err := kwokconfig.UnmarshalWithType[*internalversion.Stage](raw)
		if err != nil {
			t.Fatal(err)
		}
		byRef[s.Spec.ResourceRef] = append(byRef[s.Spec.ResourceRef], s)
	}
	return lifecycles(t, byRef)
}

// matched is the name of the stage lc plays for obj, or "" for none.
func matched(t testing.TB, lc lifecycle.Lifecycle, obj metav1.Object) string {
	t.Helper()
	s, err := lc.Match(context.Background(), &lifecycle.Event{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(), Data: obj})
	if err != nil {
		t.Fatalf("%s: %v", obj.GetName(), err)
	}
	if s == nil {
		return ""
	}
	return s.Name()
}

// TestSelectInCEL: the stages' CEL selectors choose the stage kwok's own
// JQ selectors choose, for Pods and Nodes in each state they meet.
func TestSelectInCEL(t *testing.T) {
	byRef, err := stages(NewOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range byRef {
		for _, s := range list {
			for _, e := range s.Spec.Selector.MatchExpressions {
				if e.JQ != nil {
					t.Errorf("stage %s still selects with JQ: %s", s.Name, e.JQ.Key)
				}
			}
		}
	}
	ours, kwoks := lifecycles(t, byRef), kwokLifecycles(t)

	now := metav1.Now()
	condition := func(typ corev1.PodConditionType, status corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: status}
	}
	pod := func(name string, phase corev1.PodPhase, edit func(*corev1.Pod), conditions ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "a"}},
			Spec: corev1.PodSpec{NodeName: "kwok-node-0"}, Status: corev1.PodStatus{Phase: phase, Conditions: conditions}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &now }
	ownedBy := func(kind string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: "o", UID: "u"}}
		}
	}
	node := func(name string, phase corev1.NodePhase, ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Phase: phase}}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: ready}}
		}
		return n
	}
	for _, tc := range []struct {
		kind string
		obj  interface {
			metav1.Object
			runtime.Object
		}
		want string
	}{
		{"Pod", pod("created", "", nil), ""},
		{"Pod", pod("pending", corev1.PodPending, nil), "pod-ready"},
		{"Pod", pod("scheduled", corev1.PodPending, nil, condition(corev1.PodScheduled, corev1.ConditionTrue)), "pod-ready"},
		{"Pod", pod("not ready", corev1.PodPending, nil, condition(corev1.PodReady, corev1.ConditionFalse)), "pod-ready"},
		{"Pod", pod("pending and ready", corev1.PodPending, nil, condition(corev1.PodReady, corev1.ConditionTrue)), ""},
		{"Pod", pod("running", corev1.PodRunning, ownedBy("ReplicaSet"), condition(corev1.PodReady, corev1.ConditionTrue)), ""},
		{"Pod", pod("a Job's", corev1.PodRunning, ownedBy("Job"), condition(corev1.PodReady, corev1.ConditionTrue)), "pod-complete"},
		{"Pod", pod("a Job's, done", corev1.PodSucceeded, ownedBy("Job"), condition(corev1.PodReady, corev1.ConditionFalse)), ""},
		{"Pod", pod("deleted while pending", corev1.PodPending, deleting), "pod-delete"},
		{"Pod", pod("deleted while running", corev1.PodRunning, deleting, condition(corev1.PodReady, corev1.ConditionTrue)), "pod-delete"},
		{"Node", node("new", "", ""), "node-initialize"},
		{"Node", node("not ready", corev1.NodeRunning, corev1.ConditionFalse), "node-initialize"},
		{"Node", node("ready", corev1.NodeRunning, corev1.ConditionTrue), "node-heartbeat-with-lease"},
		{"Node", node("ready, no phase", "", corev1.ConditionTrue), ""},
	} {
		t.Run(tc.kind+" "+tc.obj.GetName(), func(t *testing.T) {
			kwok, got := matched(t, kwoks[tc.kind], tc.obj), matched(t, ours[tc.kind], tc.obj)
			if kwok != tc.want {
				t.Fatalf("kwok's own stages play %q, the table says %q: the table is wrong", kwok, tc.want)
			}
			if got != kwok {
				t.Errorf("the CEL selectors play %q, kwok's JQ ones %q", got, kwok)
			}
		})
	}
}

// BenchmarkMatch is what kwok pays for each event of a Running Pod, the
// event it sees most, with kwok's JQ selectors and with the CEL ones.
func BenchmarkMatch(b *testing.B) {
	byRef, err := stages(NewOptions())
	if err != nil {
		b.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9c-x2x4z", Namespace: "load-1", Labels: map[string]string{"app": "web", "pod-template-hash": "7d9c"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c", UID: "u"}}},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			PodIP: "10.244.0.5", ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Image: "registry.k8s.io/pause:3.10"}}},
	}
	for name, lc := range map[string]lifecycle.Lifecycle{"jq": kwokLifecycles(b)["Pod"], "cel": lifecycles(b, byRef)["Pod"]} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if matched(b, lc, p) != "" {
					b.Fatal("a Running Pod matched a stage")
				}
			}
		})
	}
}
