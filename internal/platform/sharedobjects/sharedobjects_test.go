package sharedobjects

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(uid, resourceVersion string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID(uid), ResourceVersion: resourceVersion,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
}

func TestTransformSharesOneCopyPerVersion(t *testing.T) {
	p := New()
	first := pod("u1", "5")
	tests := []struct {
		name string
		obj  any
		// same is true when Transform must return first.
		same bool
	}{
		{"the first copy is held", first, true},
		{"another copy of that version gets the held one", pod("u1", "5"), true},
		{"a newer version is its own", pod("u1", "6"), false},
		{"another object's same resourceVersion is its own", pod("u2", "5"), false},
		{"an object never stored is its own", pod("", ""), false},
		{"a Node is held apart from Pods", &corev1.Node{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "5"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Transform(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if same := got == any(first); same != tt.same {
				t.Errorf("Transform returned the first copy: %v, want %v", same, tt.same)
			}
			if got != any(first) && got != tt.obj {
				t.Errorf("Transform returned an object that is neither the held copy nor its argument")
			}
		})
	}
	if first.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", first.ManagedFields)
	}
	runtime.KeepAlive(first)
}

func TestTransformWithoutPoolDropsManagedFields(t *testing.T) {
	var p *Pool
	in := pod("u1", "5")
	out, err := p.Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	if out != any(in) || in.ManagedFields != nil {
		t.Errorf("Transform on a nil pool: got %v with managedFields %v, want its argument without", out, in.ManagedFields)
	}
}

// TestPoolForgetsCollectedCopies checks that the pool keeps nothing alive:
// once no informer holds a version, its entry goes, and a later copy of
// that version is held afresh.
func TestPoolForgetsCollectedCopies(t *testing.T) {
	p := New()
	for i := range 100 {
		if _, err := p.Transform(pod("u", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Len(); n != 100 {
		t.Fatalf("Len = %d, want 100", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d after the copies were collected, want 0", p.Len())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	again := pod("u", "0")
	got, err := p.Transform(again)
	if err != nil {
		t.Fatal(err)
	}
	if got != any(again) {
		t.Errorf("a collected version's new copy was not held afresh")
	}
}

// unfinished is kube-scheduler's pod informer's selector as a predicate.
func unfinished(obj any) bool {
	return obj.(*corev1.Pod).Status.Phase != corev1.PodSucceeded
}

func podIn(phase corev1.PodPhase) *corev1.Pod {
	p := pod("u1", "7")
	p.Status.Phase = phase
	return p
}

// TestSelectedCopies: a watch with a selector (kube-scheduler's Pods,
// finished ones left out) gets DELETED with the Pod's previous content
// under the new resourceVersion when the Pod finishes. Such a copy of
// that version must never be taken as the version's content; a selected
// watch's copy of a version whose content matches the selector is that
// content, and is shared.
func TestSelectedCopies(t *testing.T) {
	tests := []struct {
		name string
		// steps: each an object, whether a selected informer transforms
		// it, and which earlier step's object (or its own, -1) it must get.
		steps []step
	}{
		{"the selected informer first, a matching version: one copy", []step{
			{podIn(corev1.PodRunning), true, -1},
			{podIn(corev1.PodRunning), false, 0},
			{podIn(corev1.PodRunning), false, 0},
		}},
		{"the selected informer first, a previous content: the true one is held apart", []step{
			{podIn(corev1.PodRunning), true, -1},
			{podIn(corev1.PodSucceeded), false, -1},
			{podIn(corev1.PodSucceeded), false, 1},
			{podIn(corev1.PodRunning), true, 1},
		}},
		{"the unselected informer first: the selected one takes its copy", []step{
			{podIn(corev1.PodRunning), false, -1},
			{podIn(corev1.PodRunning), true, 0},
		}},
		{"two selected informers keep their own", []step{
			{podIn(corev1.PodRunning), true, -1},
			{podIn(corev1.PodRunning), true, -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New()
			selected := p.Selected(unfinished)
			var got []any
			for i, st := range tt.steps {
				transform := p.Transform
				if st.selected {
					transform = selected
				}
				out, err := transform(st.obj)
				if err != nil {
					t.Fatal(err)
				}
				want := any(st.obj)
				if st.from >= 0 {
					want = got[st.from]
				}
				if out != want {
					t.Errorf("step %d (phase %s, selected %v): got a copy in phase %s, not the one wanted", i, st.obj.Status.Phase, st.selected, out.(*corev1.Pod).Status.Phase)
				}
				got = append(got, out)
			}
			runtime.KeepAlive(got)
		})
	}
}

type step struct {
	obj      *corev1.Pod
	selected bool
	from     int
}
