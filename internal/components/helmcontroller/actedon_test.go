package helmcontroller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestActedOn: a HelmChart's change is acted on when its spec, deletion
// or finalizers change, and not when only its status (or a label) does.
func TestActedOn(t *testing.T) {
	base := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGeneration(1)
		u.SetFinalizers([]string{finalizer})
		return u
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(*unstructured.Unstructured)
		want   bool
	}{
		{"status only", func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"revision": int64(2)} }, false},
		{"a label", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }, false},
		{"spec (generation)", func(u *unstructured.Unstructured) { u.SetGeneration(2) }, true},
		{"deleted", func(u *unstructured.Unstructured) { u.SetDeletionTimestamp(&now) }, true},
		{"finalizers", func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := base()
			tc.change(obj)
			if got := actedOn(base(), obj); got != tc.want {
				t.Errorf("actedOn = %v, want %v", got, tc.want)
			}
		})
	}
}
