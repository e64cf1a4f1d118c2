package etcdstore_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/kubeboottest"
)

// TestStreamingList checks the watch cache knows embedded etcd answers
// progress requests: a streaming list (client-go's WatchList) sends the
// current objects, then a bookmark marking their end, as kube-apiserver.
func TestStreamingList(t *testing.T) {
	srv := kubeboottest.Start(t, kubeboottest.Options{})
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		t.Fatalf("streaming list: %v", err)
	}
	defer w.Stop()
	added := map[string]bool{}
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			added[ev.Object.(*corev1.ConfigMap).Name] = true
		case watch.Bookmark:
			if ev.Object.(*corev1.ConfigMap).Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				continue
			}
			if !added["a"] || !added["b"] {
				t.Errorf("initial events ended after %v, want a and b", added)
			}
			return
		default:
			t.Fatalf("unexpected event %s: %v", ev.Type, ev.Object)
		}
	}
	t.Fatalf("watch ended before the initial-events bookmark (ctx: %v)", ctx.Err())
}
