// Package etcdtest starts embedded etcd members for tests.
package etcdtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeboot/kubeboot/internal/platform/etcd"
)

// Start starts a member in a temporary directory of t; it stops when the
// test ends.
func Start(t testing.TB) *etcd.Server {
	t.Helper()
	srv, err := etcd.Start(context.Background(), etcd.Config{Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// Main is for a package whose tests share one member: call it from
// TestMain. It starts the member in a temporary directory, calls run with
// its client, stops it and exits with run's result (run returns m.Run()).
func Main(run func(*clientv3.Client) int) {
	os.Exit(runMain(run))
}

func runMain(run func(*clientv3.Client) int) int {
	dir, err := os.MkdirTemp("", "kubeboot-etcdtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := etcd.Start(context.Background(), etcd.Config{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest: starting etcd:", err)
		return 1
	}
	defer srv.Close()
	return run(srv.Client())
}
