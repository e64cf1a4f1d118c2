package clusterip

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeboot/kubeboot/internal/api"
	"github.com/kubeboot/kubeboot/internal/etcd/etcdtest"
	"github.com/kubeboot/kubeboot/internal/registry"
	"github.com/kubeboot/kubeboot/internal/registry/ipaddress"
	"github.com/kubeboot/kubeboot/internal/storage"
)

// One embedded etcd for the package. Tests that need storage take a fresh
// key prefix (newPrefix), so they neither see nor disturb each other's
// objects and may run in parallel.
var (
	etcdClient *clientv3.Client
	scheme     *runtime.Scheme
	prefixes   atomic.Int64
)

func TestMain(m *testing.M) {
	etcdtest.Main(func(c *clientv3.Client) int {
		etcdClient, scheme = c, api.NewScheme()
		return m.Run()
	})
}

// newPrefix returns an etcd key prefix no other test uses.
func newPrefix() string {
	return fmt.Sprintf("/clusterip-test-%d", prefixes.Add(1))
}

// newIPStore returns the real IPAddress registry on etcd under prefix, as
// one apiserver has it. Two stores on one prefix are two apiservers.
func newIPStore(t testing.TB, prefix string) *registry.REST {
	t.Helper()
	backend, err := storage.New(storage.Config{Client: etcdClient, Prefix: prefix, Serializer: api.NewCodecs(scheme)})
	if err != nil {
		t.Fatal(err)
	}
	store, err := ipaddress.NewREST(backend, scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		store.Destroy()
		backend.Destroy()
	})
	return store
}

// storedIPAddresses counts the IPAddress objects under prefix, straight
// from etcd.
func storedIPAddresses(t testing.TB, prefix string) int64 {
	t.Helper()
	resp, err := etcdClient.Get(context.Background(), prefix+"/ipaddresses/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}
