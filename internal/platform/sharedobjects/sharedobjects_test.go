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

// TestSelectedCopiesAreNeverHeld checks what keeps a selected watch's
// copies out of the pool: when a Pod finishes, kube-scheduler's watch
// (finished Pods left out) gets DELETED with the Pod's previous content
// under the new resourceVersion. The controller manager's copy of that
// version must stay its own, with the true content.
func TestSelectedCopiesAreNeverHeld(t *testing.T) {
	p := New()
	stale := pod("u1", "7")
	stale.Status.Phase = corev1.PodRunning
	if got, _ := p.TransformSelected(stale); got != any(stale) {
		t.Fatalf("TransformSelected with nothing held returned another object")
	}
	finished := pod("u1", "7")
	finished.Status.Phase = corev1.PodSucceeded
	got, _ := p.Transform(finished)
	if got != any(finished) {
		t.Fatalf("Transform returned the selected watch's copy (phase %s), want its own (phase %s)",
			got.(*corev1.Pod).Status.Phase, finished.Status.Phase)
	}
	if got, _ := p.TransformSelected(pod("u1", "7")); got != any(finished) {
		t.Errorf("TransformSelected did not take the held copy")
	}
	runtime.KeepAlive(finished)
}
