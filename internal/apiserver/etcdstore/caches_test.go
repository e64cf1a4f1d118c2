package etcdstore_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apistorage "k8s.io/apiserver/pkg/storage"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"

	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/platform/etcd/etcdtest"
)

// TestWaitForCaches checks WaitForCaches returns once the watch caches
// serve watches (a loading cache answers 429), and forgets the caches
// that were destroyed.
func TestWaitForCaches(t *testing.T) {
	e := etcdtest.Start(t)
	backend, err := etcdstore.New(etcdstore.Config{Client: e.Client(), Serializer: legacyscheme.Codecs, EnableWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Destroy()

	newStore := func(resource string) (apistorage.Interface, func()) {
		gr := schema.GroupResource{Resource: resource}
		opts, err := backend.GetRESTOptions(gr, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, destroy, err := opts.Decorator(opts.StorageConfig, opts.ResourcePrefix, nil,
			func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} },
			apistorage.DefaultNamespaceScopedAttr, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, destroy
	}
	configMaps, destroyConfigMaps := newStore("configmaps")
	defer destroyConfigMaps()
	_, destroySecrets := newStore("secrets")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := backend.WaitForCaches(ctx); err != nil {
		t.Fatalf("WaitForCaches: %v", err)
	}
	w, err := configMaps.Watch(ctx, "/configmaps/", apistorage.ListOptions{ResourceVersion: "0", Recursive: true, Predicate: apistorage.Everything})
	if err != nil {
		t.Fatalf("watch once the caches are ready: %v", err)
	}
	w.Stop()

	// A destroyed cache is never ready again; it must not hold up the wait.
	destroySecrets()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := backend.WaitForCaches(ctx); err != nil {
		t.Fatalf("WaitForCaches after a cache was destroyed: %v", err)
	}
}
