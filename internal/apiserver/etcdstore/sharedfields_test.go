package etcdstore

import (
	"bytes"
	"context"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	api "k8s.io/kubernetes/pkg/apis/core"
)

// fieldSet is a serialized field set of n bytes, a fresh copy each call.
func fieldSet(c byte, n int) []byte {
	return bytes.Repeat([]byte{c}, n)
}

func same(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

func TestFieldSetsShare(t *testing.T) {
	sets := newFieldSets()
	first := fieldSet('a', 200)
	if got := sets.share(first); !same(got, first) {
		t.Fatal("the first copy is not held")
	}
	tests := []struct {
		name string
		raw  []byte
		// shared: the first copy is returned.
		shared bool
	}{
		{"an equal set gets the held copy", fieldSet('a', 200), true},
		{"another set is its own", fieldSet('b', 200), false},
		{"a longer one is its own", fieldSet('a', 201), false},
		{"a short set is never held", fieldSet('a', minSharedFieldSet-1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sets.share(tt.raw)
			if !bytes.Equal(got, tt.raw) {
				t.Fatalf("share changed the content: %q", got)
			}
			if same(got, first) != tt.shared {
				t.Errorf("share returned the held copy: %v, want %v", same(got, first), tt.shared)
			}
		})
	}
	goruntime.KeepAlive(first)
}

// TestFieldSetsForget: the table keeps no set alive; once no object holds
// one, its entry goes.
func TestFieldSetsForget(t *testing.T) {
	sets := newFieldSets()
	for i := range 50 {
		sets.share(fieldSet(byte(i), 100))
	}
	if n := sets.len(); n != 50 {
		t.Fatalf("len = %d, want 50", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sets.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after their sets were collected", sets.len())
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// pod is a stored Pod with two managers' field sets, fresh copies.
func pod(name string) *api.Pod {
	return &api.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", FieldsV1: &metav1.FieldsV1{Raw: fieldSet('c', 300)}},
		{Manager: "kubelet", FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat(name, 100))}},
	}}}
}

// listWatch is the storage under the watch cache: a list and a watch of
// given objects.
type listWatch struct {
	storage.Interface
	list  []api.Pod
	watch *watch.FakeWatcher
}

func (l listWatch) GetList(_ context.Context, _ string, _ storage.ListOptions, listObj runtime.Object) error {
	listObj.(*api.PodList).Items = l.list
	return nil
}

func (l listWatch) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return l.watch, nil
}

// TestSharingFieldSets: what the watch cache lists and watches holds one
// copy of each field set, and each object its own content.
func TestSharingFieldSets(t *testing.T) {
	fake := watch.NewFakeWithChanSize(2, false)
	s := sharingFieldSets{listWatch{list: []api.Pod{*pod("a"), *pod("b")}, watch: fake}, newFieldSets()}
	var list api.PodList
	if err := s.GetList(context.Background(), "/pods", storage.ListOptions{}, &list); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(context.Background(), "/pods", storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fake.Add(pod("c"))
	fake.Modify(pod("a"))
	pods := []*api.Pod{&list.Items[0], &list.Items[1]}
	for range 2 {
		e := <-w.ResultChan()
		pods = append(pods, e.Object.(*api.Pod))
	}
	controllerManager := pods[0].ManagedFields[0].FieldsV1.Raw
	for i, p := range pods {
		if !same(p.ManagedFields[0].FieldsV1.Raw, controllerManager) {
			t.Errorf("object %d (%s): kube-controller-manager's field set is its own copy", i, p.Name)
		}
		if want := strings.Repeat(p.Name, 100); string(p.ManagedFields[1].FieldsV1.Raw) != want {
			t.Errorf("object %d (%s): kubelet's field set is %.20q..., want its own", i, p.Name, p.ManagedFields[1].FieldsV1.Raw)
		}
	}
	if !same(pods[0].ManagedFields[1].FieldsV1.Raw, pods[3].ManagedFields[1].FieldsV1.Raw) {
		t.Errorf("two versions of Pod a hold two copies of kubelet's equal field set")
	}
	if same(pods[0].ManagedFields[1].FieldsV1.Raw, pods[1].ManagedFields[1].FieldsV1.Raw) {
		t.Errorf("Pods a and b share kubelet's different field sets")
	}
}
