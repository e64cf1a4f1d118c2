package ha

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kubeboot/kubeboot/internal/platform/etcdsnapshot"
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

// TestSnapshotsToS3: with --etcd-s3, scheduled snapshots are uploaded to
// a bucket of an S3 service (gofakes3 over TLS, taking only requests
// signed with its keys) and pruned there to the retention; `etcd-snapshot
// save|list|delete|prune --etcd-s3` work on the bucket too; a wrong key,
// a missing bucket or an unreachable service keeps the snapshot locally
// and says why in one line, and a scheduled snapshot that does not reach
// the bucket is a Warning Event; --cluster-reset-restore-path restores a
// snapshot (compressed, --etcd-snapshot-compress) from the bucket when it
// is not a local file; --etcd-s3-config-secret takes the bucket from a
// Secret.
func TestSnapshotsToS3(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s3 := harness.StartS3(t, "snapshots")
	dataDir := filepath.Join(t.TempDir(), "data")
	s3Args := func(endpoint, bucket, secret string) []string {
		return []string{"--etcd-s3", "--etcd-s3-endpoint", endpoint, "--etcd-s3-endpoint-ca", s3.CAFile, "--etcd-s3-bucket", bucket,
			"--etcd-s3-folder", "cluster-a", "--etcd-s3-access-key", s3.AccessKey, "--etcd-s3-secret-key", secret}
	}
	good := s3Args(s3.Endpoint, "snapshots", s3.SecretKey)
	args := append([]string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16",
		"--etcd-snapshot-schedule-cron", "@every 1s", "--etcd-snapshot-retention", "2"}, good...)
	kubeboot := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	srv := harness.StartReadyAPIServer(t, readyTimeout, bin, dataDir, args...)
	client := srv.MustClient(t)
	create := func(name string) {
		t.Helper()
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inBucket := func(prefix string) int {
		n := 0
		for _, k := range s3.Objects(t, "snapshots") {
			if strings.HasPrefix(k, "cluster-a/"+prefix) {
				n++
			}
		}
		return n
	}

	// Scheduled snapshots reach the bucket, two kept there.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return inBucket("etcd-snapshot-") == 2, nil
	})
	if err != nil {
		t.Fatalf("no two scheduled snapshots in the bucket within 20 s: %v", s3.Objects(t, "snapshots"))
	}
	time.Sleep(2500 * time.Millisecond)
	if n := inBucket("etcd-snapshot-"); n != 2 {
		t.Errorf("after more scheduled snapshots, %d in the bucket, want 2: %v", n, s3.Objects(t, "snapshots"))
	}

	create("before")
	out, stderr, err := kubeboot(append([]string{"etcd-snapshot", "save", "--data-dir", dataDir, "--name", "test", "--etcd-snapshot-compress"}, good...)...)
	if err != nil || !strings.Contains(out, "uploaded to s3://snapshots/cluster-a/test-") || !strings.HasSuffix(strings.TrimSpace(out), ".zip") {
		t.Fatalf("etcd-snapshot save --etcd-s3: %v\n%s%s", err, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	name := filepath.Base(lines[len(lines)-1])
	create("after")
	if out, _, err := kubeboot(append([]string{"etcd-snapshot", "list", "--data-dir", dataDir}, good...)...); err != nil || !strings.Contains(out, "s3://snapshots/cluster-a/"+name) {
		t.Errorf("etcd-snapshot list --etcd-s3 does not list %s in the bucket: %v\n%s", name, err, out)
	}

	// What keeps a snapshot from the bucket: one line names it, and the
	// snapshot is kept.
	for _, tc := range []struct {
		name string
		s3   []string
		want string
	}{
		{"a wrong secret key", s3Args(s3.Endpoint, "snapshots", "not-the-secret-key"), "the keys are refused"},
		{"a missing bucket", s3Args(s3.Endpoint, "no-such-bucket", s3.SecretKey), "bucket no-such-bucket does not exist"},
		{"an unreachable service", s3Args("127.0.0.1:1", "snapshots", s3.SecretKey), "connection refused"},
	} {
		out, stderr, err := kubeboot(append([]string{"etcd-snapshot", "save", "--data-dir", dataDir, "--name", "failed"}, tc.s3...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		_, statErr := os.Stat(lines[len(lines)-1])
		if err == nil || len(strings.Split(strings.TrimSpace(stderr), "\n")) != 1 || !strings.Contains(stderr, tc.want) || statErr != nil {
			t.Errorf("save with %s: %v, stderr %q (want one line saying %q), the snapshot kept: %v", tc.name, err, stderr, tc.want, statErr)
		}
	}
	// The bucket goes away: the next scheduled snapshot is an Event.
	if err := s3.Backend.ForceDeleteBucket("snapshots"); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=ETCDSnapshotFailed"})
		return err == nil && len(events.Items) > 0 && strings.Contains(events.Items[0].Message, "does not exist"), nil
	})
	if err != nil {
		t.Errorf("no ETCDSnapshotFailed Event for a scheduled snapshot without its bucket: %v", err)
	}
	srv.Kill()
	// The bucket is back, with the snapshot: a restore takes it from
	// there when it is not local.
	if err := s3.Backend.CreateBucket("snapshots"); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dataDir, "snapshots", name)
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	// As gofakes3's handler stores an upload.
	meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	if _, err := s3.Backend.PutObject("snapshots", "cluster-a/"+name, meta, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(local); err != nil {
		t.Fatal(err)
	}
	base := args[:len(args)-len(good)]
	out, stderr, err = kubeboot(append(append([]string{"apiserver", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", name}, base...), good...)...)
	if err != nil || !strings.Contains(out+stderr, "without --cluster-reset") {
		t.Fatalf("restore from the bucket: %v\n%s%s", err, out, stderr)
	}
	// Restarted, the server takes its bucket from a Secret instead.
	srv = harness.StartReadyAPIServer(t, readyTimeout, bin, dataDir, append(base, "--etcd-s3", "--etcd-s3-config-secret", "s3-config")...)
	client = srv.MustClient(t)
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Errorf("the snapshot's ConfigMap after the restore from the bucket: %v", err)
	}
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "after", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap made after the snapshot: %v, want NotFound", err)
	}

	// delete and prune work on the bucket too.
	if out, stderr, err := kubeboot(append([]string{"etcd-snapshot", "delete", "--data-dir", dataDir, name}, good...)...); err != nil || inBucket(name) != 0 {
		t.Errorf("etcd-snapshot delete --etcd-s3 %s: %v, in the bucket: %v\n%s%s", name, err, s3.Objects(t, "snapshots"), out, stderr)
	}
	for range 3 {
		if out, stderr, err := kubeboot(append([]string{"etcd-snapshot", "save", "--data-dir", dataDir, "--name", "kept"}, good...)...); err != nil {
			t.Fatalf("save: %v\n%s%s", err, out, stderr)
		}
		time.Sleep(1100 * time.Millisecond) // names end in the second
	}
	if out, stderr, err := kubeboot(append([]string{"etcd-snapshot", "prune", "--data-dir", dataDir, "--name", "kept", "--etcd-snapshot-retention", "1"}, good...)...); err != nil || inBucket("kept-") != 1 {
		t.Errorf("etcd-snapshot prune --etcd-s3 to 1: %v, in the bucket: %v\n%s%s", err, s3.Objects(t, "snapshots"), out, stderr)
	}

	// --etcd-s3-config-secret: the Secret's keys configure the bucket,
	// read at each snapshot.
	ca, err := os.ReadFile(s3.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	config := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-config", Namespace: metav1.NamespaceSystem}, StringData: map[string]string{
		"etcd-s3-endpoint": s3.Endpoint, "etcd-s3-endpoint-ca": string(ca), "etcd-s3-bucket": "snapshots", "etcd-s3-folder": "from-secret",
		"etcd-s3-access-key": s3.AccessKey, "etcd-s3-secret-key": s3.SecretKey, "etcd-s3-timeout": "30s"}}
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return slices.ContainsFunc(s3.Objects(t, "snapshots"), func(k string) bool { return strings.HasPrefix(k, "from-secret/etcd-snapshot-") }), nil
	})
	if err != nil {
		t.Errorf("no scheduled snapshot in the bucket of --etcd-s3-config-secret: %v", s3.Objects(t, "snapshots"))
	}
}

// TestETCDSnapshotFiles: `kubeboot server` records its snapshots, those of
// its snapshot directory and of the --etcd-s3 bucket, as k3s's
// ETCDSnapshotFile objects: the scheduled ones at once, kept to the
// retention, and what `kubeboot etcd-snapshot` saves and deletes within
// --etcd-snapshot-reconcile-interval.
func TestETCDSnapshotFiles(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s3 := harness.StartS3(t, "snapshots")
	s3Args := []string{"--etcd-s3", "--etcd-s3-endpoint", s3.Endpoint, "--etcd-s3-endpoint-ca", s3.CAFile, "--etcd-s3-bucket", "snapshots",
		"--etcd-s3-folder", "cluster-b", "--etcd-s3-access-key", s3.AccessKey, "--etcd-s3-secret-key", s3.SecretKey}
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := harness.StartReadyServer(t, readyTimeout, bin, dataDir, append([]string{"--bind-address", "127.0.0.1", "--secure-port", "0",
		"--service-cluster-ip-range", "10.96.0.0/16", "--etcd-snapshot-schedule-cron", "@every 1s", "--etcd-snapshot-retention", "2",
		"--etcd-snapshot-reconcile-interval", "1s"}, s3Args...)...)
	config, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	files := dynamic.NewForConfigOrDie(config).Resource(etcdsnapshot.FileResource)
	// records counts the objects by where their snapshot is, and tells
	// whether one is of the snapshot name.
	records := func(name string) (local, remote int, found bool) {
		list, err := files.List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, false
		}
		for _, o := range list.Items {
			location, _, _ := unstructured.NestedString(o.Object, "spec", "location")
			snapshot, _, _ := unstructured.NestedString(o.Object, "spec", "snapshotName")
			ready, _, _ := unstructured.NestedBool(o.Object, "status", "readyToUse")
			found = found || snapshot == name && ready
			switch {
			case !strings.Contains(snapshot, "etcd-snapshot-"):
			case o.GetLabels()[etcdsnapshot.StorageNodeLabel] == etcdsnapshot.S3Storage && strings.HasPrefix(location, "s3://snapshots/cluster-b/"):
				remote++
			case strings.HasPrefix(location, "file://"+dataDir):
				local++
			}
		}
		return local, remote, found
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		local, remote, _ := records("")
		return local == 2 && remote == 2, nil
	})
	if err != nil {
		local, remote, _ := records("")
		t.Fatalf("the scheduled snapshots' ETCDSnapshotFiles: %d local, %d in the bucket; want 2 and 2", local, remote)
	}

	out, err := exec.Command(bin, append([]string{"etcd-snapshot", "save", "--data-dir", dataDir, "--name", "by-hand"}, s3Args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("etcd-snapshot save: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	name := filepath.Base(lines[len(lines)-1])
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, _, found := records(name)
		return found, nil
	})
	if err != nil {
		t.Errorf("no ETCDSnapshotFile of the snapshot saved by hand, %s", name)
	}
	if out, err := exec.Command(bin, append([]string{"etcd-snapshot", "delete", "--data-dir", dataDir, name}, s3Args...)...).CombinedOutput(); err != nil {
		t.Fatalf("etcd-snapshot delete: %v\n%s", err, out)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, _, found := records(name)
		return !found, nil
	})
	if err != nil {
		t.Errorf("the ETCDSnapshotFiles of the deleted snapshot %s are still there", name)
	}
}
