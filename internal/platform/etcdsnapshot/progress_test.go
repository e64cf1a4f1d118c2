package etcdsnapshot

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/internal/platform/progress"
	"github.com/kubeboot/kubeboot/internal/platform/progress/progresstest"
)

// writeSnapshot writes size bytes and their SHA-256, as etcd's snapshots
// end; corrupt flips a byte of the content after the sum was taken.
func writeSnapshot(t *testing.T, size int, corrupt bool) string {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	sum := sha256.Sum256(data)
	if corrupt {
		data[size/2]++
	}
	path := filepath.Join(t.TempDir(), "snap")
	if err := os.WriteFile(path, append(data, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVerifyReportsWhatItRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt bool
	}{{"whole", false}, {"corrupt", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const size = 3 << 20
			var r progresstest.Recorder
			err := Verify(writeSnapshot(t, size, tc.corrupt), r.Report)
			if tc.corrupt != errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify: %v, want corrupt %v", err, tc.corrupt)
			}
			updates := r.Updates("")
			if len(updates) < 3 {
				t.Fatalf("%d updates for %d bytes, want several", len(updates), size)
			}
			var last int64
			for _, u := range updates {
				if u.Step != "checking snapshot" || u.Total != size || u.Unit != progress.Bytes || u.Done < last {
					t.Fatalf("update %+v after Done %d: want the step's bytes, counting up to %d", u, last, size)
				}
				last = u.Done
			}
			if end := updates[len(updates)-1]; !end.Finished() || end.Done != size {
				t.Errorf("last update %+v, want the end at %d bytes", end, size)
			}
		})
	}
}

func TestWatchSizeStopsShortOfTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	const total = 1000
	var r progresstest.Recorder
	stop := watchSize(path, progress.Update{Step: "restoring snapshot", Total: total, Unit: progress.Bytes}, r.Report)
	// The file reaches its full size while its writer still works on it.
	if err := os.WriteFile(path, make([]byte, total), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		updates := r.Updates("")
		if n := len(updates); n > 0 && updates[n-1].Done == total-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no update of the written size within 10 s: %+v", updates)
		}
		time.Sleep(sizePollInterval / 2)
	}
	for _, u := range r.Updates("") {
		if u.Finished() {
			t.Fatalf("update %+v ends the step before stop", u)
		}
	}
	stop()
	updates := r.Updates("")
	if end := updates[len(updates)-1]; !end.Finished() {
		t.Errorf("after stop the last update is %+v, want the end", end)
	}
	// Nothing reports after stop.
	n := len(updates)
	time.Sleep(2 * sizePollInterval)
	if got := len(r.Updates("")); got != n {
		t.Errorf("%d updates after stop", got-n)
	}
}
