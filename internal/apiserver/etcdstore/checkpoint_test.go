package etcdstore_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/platform/etcd/etcdtest"
)

func contents(t *testing.T, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// TestCheckpointRestore: Restore deletes keys created since, writes back
// keys changed or deleted since (more than one transaction's worth), and
// leaves kept prefixes, keys outside the prefix, and leased keys alone.
func TestCheckpointRestore(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	put := func(k, v string, opts ...clientv3.OpOption) {
		t.Helper()
		if _, err := cli.Put(ctx, k, v, opts...); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		put(fmt.Sprintf("/registry/configmaps/default/cm-%03d", i), "v1")
	}
	put("/registry/namespaces/default", "default")
	put("/registry/leases/kube-system/leader", "holder-a")
	put("/registry/events/default/e1", "event", clientv3.WithLease(lease.ID))
	put("/registryx/outside", "before")
	cp, err := etcdstore.NewCheckpoint(ctx, cli, "/registry", "leases/kube-system/")
	if err != nil {
		t.Fatal(err)
	}
	want := contents(t, cli, "/registry/")
	delete(want, "/registry/events/default/e1") // leased: deleted below, not written back
	want["/registry/leases/kube-system/leader"] = "holder-b"

	for i := range 150 {
		put(fmt.Sprintf("/registry/configmaps/default/cm-%03d", i), "v2") // 150 writes back
	}
	for i := range 120 {
		put(fmt.Sprintf("/registry/configmaps/scratch/new-%03d", i), "new") // 120 deletes
	}
	if _, err := cli.Delete(ctx, "/registry/namespaces/default"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "/registry/events/default/e1"); err != nil {
		t.Fatal(err)
	}
	put("/registry/leases/kube-system/leader", "holder-b")
	put("/registryx/outside", "after")

	deleted, written, err := cp.Restore(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 120 || written != 151 {
		t.Errorf("Restore deleted %d and wrote %d keys, want 120 and 151", deleted, written)
	}
	if got := contents(t, cli, "/registry/"); !maps.Equal(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("after Restore %s = %q, want %q", k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("after Restore %s is still there", k)
			}
		}
	}
	if got := contents(t, cli, "/registryx/"); got["/registryx/outside"] != "after" {
		t.Errorf("a key outside the prefix was restored: %v", got)
	}
	// Nothing changed since: a second Restore does nothing.
	if d, w, err := cp.Restore(ctx, cli); err != nil || d != 0 || w != 0 {
		t.Errorf("second Restore: deleted %d, wrote %d, %v; want nothing to do", d, w, err)
	}
	// A key written back once is written back again when it changes.
	put("/registry/namespaces/default", "edited")
	if d, w, err := cp.Restore(ctx, cli); err != nil || d != 0 || w != 1 {
		t.Errorf("third Restore: deleted %d, wrote %d, %v; want the edited key written back", d, w, err)
	}
	if got := contents(t, cli, "/registry/namespaces/"); got["/registry/namespaces/default"] != "default" {
		t.Errorf("after the third Restore: %v", got)
	}
}
