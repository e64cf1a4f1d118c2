package controlplane_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"

	"github.com/kubeboot/kubeboot/controlplane"
)

// TestNewFailureStopsEtcd: New starts embedded etcd while it builds the
// API server's configuration; when the configuration fails, etcd is
// stopped too, so that the data dir can be started again (a member left
// running would hold its database's lock, and the next start would wait
// for it forever).
func TestNewFailureStopsEtcd(t *testing.T) {
	dataDir := t.TempDir()
	broken := testConfigIn(t, dataDir, func(c *controlplane.Config) {
		c.Admission = kubeoptions.NewAdmissionOptions()
		c.Admission.GenericAdmission.ConfigFile = filepath.Join(dataDir, "missing-admission-config.yaml")
	})
	if _, err := controlplane.New(context.Background(), broken); err == nil {
		t.Fatal("New with a missing admission configuration file succeeded")
	}

	started := make(chan error, 1)
	go func() {
		srv, err := controlplane.New(context.Background(), testConfigIn(t, dataDir, nil))
		if err == nil {
			controlplane.Close(srv)
		}
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("New on the same data dir after a failed New: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("New on the same data dir after a failed New did not return in a minute: the first etcd member still runs")
	}
}
