package ha

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestSnapshotRestore: `etcd-snapshot save` on a running server, a
// change, then --cluster-reset --cluster-reset-restore-path: the change is
// gone, what the snapshot holds is back. A corrupt snapshot is refused
// without touching the data; a start that still has --cluster-reset is
// refused; scheduled snapshots keep --etcd-snapshot-retention.
func TestSnapshotRestore(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16",
		"--etcd-snapshot-schedule-cron", "@every 1s", "--etcd-snapshot-retention", "2"}
	kubeboot := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	srv := harness.StartReadyAPIServer(t, readyTimeout, bin, dataDir, args...)
	client := srv.MustClient(t)
	create := func(name string) {
		t.Helper()
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("before")
	out, err := kubeboot("etcd-snapshot", "save", "--data-dir", dataDir, "--name", "test")
	if err != nil {
		t.Fatalf("etcd-snapshot save: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	snapshot := lines[len(lines)-1]
	if _, err := os.Stat(snapshot); err != nil {
		t.Fatalf("save's last line %q is not the snapshot: %v", snapshot, err)
	}
	create("after")

	// Scheduled snapshots: every second, two kept.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		out, _ := kubeboot("etcd-snapshot", "list", "--data-dir", dataDir)
		return scheduled(out) == 2, nil
	})
	if err != nil {
		t.Fatal("no two scheduled snapshots within 20 s")
	}
	time.Sleep(2500 * time.Millisecond)
	if out, _ := kubeboot("etcd-snapshot", "list", "--data-dir", dataDir); scheduled(out) != 2 || !strings.Contains(out, filepath.Base(snapshot)) {
		t.Errorf("after more scheduled snapshots, want 2 of them and the saved one:\n%s", out)
	}
	srv.Kill()

	// A corrupt copy is refused before anything changes.
	data, err := os.ReadFile(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if err := os.WriteFile(corrupt, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubeboot(append([]string{"apiserver", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", corrupt}, args...)...); err == nil || !strings.Contains(out, "--cluster-reset-restore-path") || !strings.Contains(out, "corrupt") {
		t.Errorf("a corrupt snapshot: err %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "etcd", "member")); err != nil {
		t.Fatalf("a refused restore touched the etcd data: %v", err)
	}

	out, err = kubeboot(append([]string{"apiserver", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", snapshot}, args...)...)
	if err != nil || !strings.Contains(out, "without --cluster-reset") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if out, err := kubeboot(append([]string{"apiserver", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", snapshot}, args...)...); err == nil || !strings.Contains(out, "reset already") {
		t.Errorf("a second start with --cluster-reset: err %v\n%s", err, out)
	}
	srv = harness.StartReadyAPIServer(t, readyTimeout, bin, dataDir, args...)
	client = srv.MustClient(t)
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Errorf("the snapshot's ConfigMap after the restore: %v", err)
	}
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "after", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap made after the snapshot: %v, want NotFound", err)
	}
	// Writes go on after the restore, at revisions past the old ones.
	create("after-restore")
	if _, err := os.Stat(filepath.Join(dataDir, "cluster-reset")); err == nil {
		t.Error("the reset marker is still there after a start without --cluster-reset")
	}
}

// scheduled counts the scheduled snapshots in `etcd-snapshot list`'s
// output.
func scheduled(list string) int {
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, "etcd-snapshot-") {
			n++
		}
	}
	return n
}
