package etcd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
)

// CheckDataDir verifies, without writing anything, that dir holds no etcd
// data or data etcd can start from: its backend database opens and its
// write-ahead log reads back. etcd itself panics or rewrites files when it
// meets damaged data; this lets the caller refuse a foreign or broken data
// directory with one clear error before anything is touched.
func CheckDataDir(dir string) (err error) {
	member := filepath.Join(dir, "member")
	if _, statErr := os.Stat(member); os.IsNotExist(statErr) {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("etcd data in %s is not usable: %v", dir, r)
		}
	}()
	lg := zap.NewNop()
	dbPath := filepath.Join(member, "snap", "db")
	if _, statErr := os.Stat(dbPath); statErr == nil {
		db, err := bolt.Open(dbPath, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			return fmt.Errorf("etcd database %s is not usable: %w", dbPath, err)
		}
		if err := db.Close(); err != nil {
			return fmt.Errorf("etcd database %s: %w", dbPath, err)
		}
	}
	walDir := filepath.Join(member, "wal")
	if !wal.Exist(walDir) {
		return nil
	}
	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return fmt.Errorf("etcd write-ahead log in %s is not usable: %w", walDir, err)
	}
	ws := &walpb.Snapshot{}
	s, err := snap.New(lg, filepath.Join(member, "snap")).LoadNewestAvailable(walSnaps)
	switch {
	case err == nil:
		ws = &walpb.Snapshot{Index: s.Metadata.Index, Term: s.Metadata.Term}
	case !errors.Is(err, snap.ErrNoSnapshot):
		return fmt.Errorf("etcd snapshot in %s is not usable: %w", member, err)
	}
	if _, err := wal.Verify(lg, walDir, ws); err != nil {
		return fmt.Errorf("etcd write-ahead log in %s is not usable: %w", walDir, err)
	}
	return nil
}
