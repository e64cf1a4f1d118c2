package simulatednodes

import (
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

func boundPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "5",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler"}}},
		Spec: corev1.PodSpec{NodeName: node},
	}
}

// TestShare: kwok's watches hand out the copies an unselected informer
// holds of the same version, whether or not they select; a selector on a
// field share cannot read leaves the watch's own objects.
func TestShare(t *testing.T) {
	tests := []struct {
		name   string
		opts   metav1.ListOptions
		shared bool
	}{
		{"everything", metav1.ListOptions{}, true},
		{"kwok's Pods: bound ones", metav1.ListOptions{FieldSelector: "spec.nodeName!="}, true},
		{"a label selector it matches", metav1.ListOptions{LabelSelector: "!app"}, true},
		{"a field it cannot read", metav1.ListOptions{FieldSelector: "spec.schedulerName=s"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := sharedobjects.New()
			held := boundPod("n1")
			if _, err := pool.Transform(held); err != nil {
				t.Fatal(err)
			}
			fake := watch.NewFakeWithChanSize(1, false)
			w := share(fake, pool, tt.opts, podAttributes)
			defer w.Stop()
			fake.Add(boundPod("n1")) // another decoded copy of the held version
			if got := nextObject(t, w) == held; got != tt.shared {
				t.Errorf("the held copy handed out: %v, want %v", got, tt.shared)
			}
			runtime.KeepAlive(held)
		})
	}
}

// TestSharePredicate: a copy kwok's selected watch decoded first is handed
// to an unselected informer only when the copy matches the watch's
// selectors, as read from the object's own fields and labels.
func TestSharePredicate(t *testing.T) {
	tests := []struct {
		name   string
		opts   metav1.ListOptions
		shared bool
	}{
		{"kwok's Pods: bound ones", metav1.ListOptions{FieldSelector: "spec.nodeName!="}, true},
		{"another node's", metav1.ListOptions{FieldSelector: "spec.nodeName=n2"}, false},
		{"its namespace and phase", metav1.ListOptions{FieldSelector: "metadata.namespace=ns,status.phase!=Running"}, true},
		{"a label it lacks", metav1.ListOptions{LabelSelector: "app=web"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := sharedobjects.New()
			fake := watch.NewFakeWithChanSize(1, false)
			w := share(fake, pool, tt.opts, podAttributes)
			defer w.Stop()
			fake.Add(boundPod("n1"))
			kwoks := nextObject(t, w)
			got, err := pool.Transform(boundPod("n1")) // an unselected informer's copy of the version
			if err != nil {
				t.Fatal(err)
			}
			if shared := got == kwoks; shared != tt.shared {
				t.Errorf("kwok's copy handed to an unselected informer: %v, want %v", shared, tt.shared)
			}
			runtime.KeepAlive(kwoks)
		})
	}
}

// nextObject is the object of w's next event.
func nextObject(t *testing.T, w watch.Interface) any {
	t.Helper()
	select {
	case e := <-w.ResultChan():
		return e.Object
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return nil
	}
}
