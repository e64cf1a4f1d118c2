package nodeport

import (
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/platform/etcd/etcdtest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// One embedded etcd for the package (and for each fuzzing worker). Every
// test, and every fuzz input, takes a fresh key prefix, so each sees its
// own /ranges/servicenodeports.
var (
	etcdClient *clientv3.Client
	scheme     *runtime.Scheme
	prefixes   atomic.Int64
)

func TestMain(m *testing.M) {
	etcdtest.Main(func(c *clientv3.Client) int {
		etcdClient, scheme = c, legacyscheme.Scheme
		return m.Run()
	})
}

// newPrefix returns an etcd key prefix no other test uses.
func newPrefix() string {
	return fmt.Sprintf("/nodeport-test-%d", prefixes.Add(1))
}

// newRawStore returns the RangeAllocation storage kube-apiserver (and
// kubeboot's apiserver) uses, under prefix; two stores on one prefix are
// two apiservers.
func newRawStore(t testing.TB, prefix string) storage.Interface {
	t.Helper()
	backend, err := etcdstore.New(etcdstore.Config{Client: etcdClient, Prefix: prefix, Serializer: legacyscheme.Codecs})
	if err != nil {
		t.Fatal(err)
	}
	store, destroy, err := backend.Raw(corev1.Resource("rangeallocations"), Key,
		func() runtime.Object { return &corev1.RangeAllocation{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		destroy()
		backend.Destroy()
	})
	return store
}
