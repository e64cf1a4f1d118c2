// Package snapshot measures snapshots of the embedded etcd (issue 27):
// with N ConfigMaps stored (-objects, default 10,000), how long
// `kubeboot etcd-snapshot save` takes on the running server, how long
// `kubeboot apiserver --cluster-reset --cluster-reset-restore-path`
// takes, and the restored server's restart to ready.
//
//	go test ./bench/snapshot -run '^$' -bench . -benchtime 3x [-args -objects 100000]
package snapshot

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

var objects = flag.Int("objects", 10000, "ConfigMaps stored before the snapshot")

func TestMain(m *testing.M) { harness.Main(m) }

func BenchmarkSnapshot(b *testing.B) {
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16", "--etcd-disable-snapshots"}
	var saves, restores, readies []float64
	var size int64
	for range b.N {
		dataDir := filepath.Join(b.TempDir(), "data")
		srv := harness.StartReadyAPIServer(b, time.Minute, bin, dataDir, args...)
		benchserver.CreateConfigMaps(b, srv.MustClient(b), *objects)
		start := time.Now()
		out, err := exec.Command(bin, "etcd-snapshot", "save", "--data-dir", dataDir).CombinedOutput()
		saves = append(saves, float64(time.Since(start).Milliseconds()))
		if err != nil {
			b.Fatalf("save: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		snapshot := lines[len(lines)-1]
		fmt.Sscanf(lines[0], "saved %d bytes", &size)
		srv.Kill()
		start = time.Now()
		if out, err := exec.Command(bin, append([]string{"apiserver", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", snapshot}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("restore: %v\n%s", err, out)
		}
		restores = append(restores, float64(time.Since(start).Milliseconds()))
		start = time.Now()
		srv = harness.StartReadyAPIServer(b, 2*time.Minute, bin, dataDir, args...)
		readies = append(readies, float64(time.Since(start).Milliseconds()))
		srv.Kill()
	}
	b.ReportMetric(benchserver.Median(saves), "save-ms")
	b.ReportMetric(benchserver.Median(restores), "restore-ms")
	b.ReportMetric(benchserver.Median(readies), "restored-ready-ms")
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
}

var s3MiB = flag.Int("s3-mib", 1024, "BenchmarkSnapshotToS3: MiB of ConfigMaps stored before the snapshots")

// BenchmarkSnapshotToS3 (issue 63): with about -s3-mib MiB in etcd (ConfigMaps
// of 900 KiB), `etcd-snapshot save` alone and `etcd-snapshot save --etcd-s3`
// (saved, then uploaded to gofakes3 over TLS, harness.StartS3), alternating:
// each one's time and the command's peak RSS.
//
//	go test ./bench/snapshot -run '^$' -bench SnapshotToS3 -benchtime 3x [-args -s3-mib 1024]
func BenchmarkSnapshotToS3(b *testing.B) {
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	s3 := harness.StartS3(b, "snapshots")
	dataDir := filepath.Join(b.TempDir(), "data")
	srv := harness.StartReadyAPIServer(b, time.Minute, bin, dataDir, "--bind-address", "127.0.0.1", "--secure-port", "0",
		"--service-cluster-ip-range", "10.96.0.0/16", "--etcd-disable-snapshots")
	client := srv.MustClient(b)
	payload := map[string]string{"payload": strings.Repeat("0123456789abcdef", 900*1024/16)}
	n := *s3MiB * 1024 / 900
	benchserver.Creates(b, n, 8, func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-%d", i)}, Data: payload}
		_, err := client.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{})
		return err
	})
	s3Args := []string{"--etcd-s3", "--etcd-s3-endpoint", s3.Endpoint, "--etcd-s3-endpoint-ca", s3.CAFile, "--etcd-s3-bucket", "snapshots",
		"--etcd-s3-access-key", s3.AccessKey, "--etcd-s3-secret-key", s3.SecretKey}
	// save runs one save and returns its time and peak RSS: VmHWM, read
	// until it exits (rusage's maxrss would count this process's, which
	// holds the bucket, from before the exec).
	save := func(extra ...string) (float64, float64) {
		cmd := exec.Command(bin, append([]string{"etcd-snapshot", "save", "--data-dir", dataDir}, extra...)...)
		var output strings.Builder
		cmd.Stdout, cmd.Stderr = &output, &output
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var hwm float64
		var err error
	poll:
		for {
			if status, readErr := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); readErr == nil {
				for _, line := range strings.Split(string(status), "\n") {
					var kb float64
					if _, scanErr := fmt.Sscanf(line, "VmHWM: %f kB", &kb); scanErr == nil {
						hwm = max(hwm, kb/1024)
					}
				}
			}
			select {
			case err = <-exited:
				break poll
			case <-time.After(20 * time.Millisecond):
			}
		}
		took := time.Since(start)
		out := output.String()
		if err != nil {
			b.Fatalf("save %v: %v\n%s", extra, err, out)
		}
		var size int64
		fmt.Sscanf(out, "saved %d bytes", &size)
		b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
		// Each snapshot's file goes once measured: the disk holds one.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		_ = os.Remove(lines[len(lines)-1])
		return float64(took.Milliseconds()), hwm
	}
	var local, remote, localRSS, remoteRSS []float64
	b.ResetTimer()
	for range b.N {
		ms, rss := save()
		local, localRSS = append(local, ms), append(localRSS, rss)
		ms, rss = save(s3Args...)
		remote, remoteRSS = append(remote, ms), append(remoteRSS, rss)
	}
	b.ReportMetric(benchserver.Median(local), "local-save-ms")
	b.ReportMetric(benchserver.Median(remote), "s3-save-ms")
	b.ReportMetric(benchserver.Median(localRSS), "local-save-maxrss-MiB")
	b.ReportMetric(benchserver.Median(remoteRSS), "s3-save-maxrss-MiB")
}
