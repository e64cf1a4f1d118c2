// Package snapshot measures snapshots of the embedded etcd (issue 27):
// with N ConfigMaps stored (-objects, default 10,000), how long
// `kubeboot etcd-snapshot save` takes on the running server, how long
// `kubeboot apiserver --cluster-reset --cluster-reset-restore-path`
// takes, and the restored server's restart to ready.
//
//	go test ./bench/snapshot -run '^$' -bench . -benchtime 3x [-args -objects 100000]
package snapshot

import (
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
