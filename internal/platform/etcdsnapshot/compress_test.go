package etcdsnapshot

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCompress: a compressed snapshot replaces the snapshot, is checked
// inside its archive, and a damaged archive is refused.
func TestCompress(t *testing.T) {
	dir := t.TempDir()
	content := []byte(strings.Repeat("etcd's bbolt pages ", 4096))
	sum := sha256.Sum256(content)
	path := filepath.Join(dir, "on-demand-node-1")
	if err := os.WriteFile(path, append(content, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := Compress(Snapshot{Name: filepath.Base(path), Path: path, Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Path != path+CompressedSuffix || snap.Size >= int64(len(content)) {
		t.Errorf("compressed to %s, %d bytes of %d", snap.Path, snap.Size, len(content))
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the uncompressed snapshot is still there: %v", err)
	}
	if err := Verify(snap.Path, nil); err != nil {
		t.Errorf("Verify of the compressed snapshot: %v", err)
	}
	raw, err := extract(snap.Path, filepath.Join(dir, "raw"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(raw, nil); err != nil {
		t.Errorf("the extracted snapshot: %v", err)
	}
	data, err := os.ReadFile(snap.Path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	damaged := filepath.Join(t.TempDir(), filepath.Base(snap.Path))
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Verify(damaged, nil); err == nil {
		t.Error("a damaged archive was taken")
	}
	renamed := filepath.Join(dir, "renamed-node-1"+CompressedSuffix)
	if err := os.Rename(snap.Path, renamed); err != nil {
		t.Fatal(err)
	}
	if err := Verify(renamed, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("an archive without the snapshot of its name: %v, want ErrCorrupt", err)
	}
}
