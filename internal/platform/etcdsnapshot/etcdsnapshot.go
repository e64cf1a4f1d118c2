// Package etcdsnapshot saves, lists, prunes and restores snapshots of a
// server's embedded etcd, as k3s's etcd-snapshot does: files named
// <name>-<node>-<unix time> in a directory of the data dir, each etcd's
// own snapshot format, whose last 32 bytes are the SHA-256 of the rest,
// so that a corrupt one is refused.
package etcdsnapshot

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeboot/kubeboot/internal/platform/progress"
)

const (
	// DefaultRetention is how many scheduled snapshots are kept
	// (--etcd-snapshot-retention), k3s's default.
	DefaultRetention = 5
	// DefaultSchedule is when snapshots are taken
	// (--etcd-snapshot-schedule-cron): every 12 hours, k3s's default.
	DefaultSchedule = "0 */12 * * *"
	// OnDemandName and ScheduledName begin the names of the snapshots
	// `etcd-snapshot save` and the schedule take, k3s's.
	OnDemandName  = "on-demand"
	ScheduledName = "etcd-snapshot"
	// RevisionBump is added to the revision on restore, and the restored
	// revision marked compacted, as etcd advises for Kubernetes: every
	// watcher and informer relists rather than missing what the restore
	// undid.
	RevisionBump = 1_000_000_000

	tmpSuffix = ".tmp"
)

// Dir is the default snapshot directory of a data dir (--etcd-snapshot-dir).
func Dir(dataDir string) string { return filepath.Join(dataDir, "snapshots") }

// Snapshot is a snapshot file.
type Snapshot struct {
	Name    string
	Path    string
	Size    int64
	Created time.Time
}

// Save streams a snapshot of the etcd client reaches into dir, as
// <name>-<node>-<unix time>: written aside, synced, checked and only then
// renamed, so that a snapshot in dir is whole.
func Save(ctx context.Context, client *clientv3.Client, dir, name, node string, now time.Time) (Snapshot, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Snapshot{}, err
	}
	final := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", name, node, now.Unix()))
	tmp := final + tmpSuffix
	if err := save(ctx, client, tmp); err != nil {
		_ = os.Remove(tmp)
		return Snapshot{}, err
	}
	if err := Verify(tmp, nil); err != nil {
		_ = os.Remove(tmp)
		return Snapshot{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return Snapshot{}, err
	}
	info, err := os.Stat(final)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Name: filepath.Base(final), Path: final, Size: info.Size(), Created: now}, nil
}

func save(ctx context.Context, client *clientv3.Client, path string) error {
	rc, err := client.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ErrCorrupt is a snapshot whose checksum does not match its content.
var ErrCorrupt = errors.New("the snapshot is corrupt: its checksum does not match its content")

// Verify checks a snapshot's trailing SHA-256 against its content,
// reporting how much of it it has read; a compressed one's
// (--etcd-snapshot-compress) is checked inside its archive.
func Verify(path string, report progress.Func) error {
	r, size, closeFn, err := openSnapshot(path)
	if err != nil {
		return err
	}
	defer closeFn()
	if size <= sha256.Size {
		return fmt.Errorf("%s: %w", path, ErrCorrupt)
	}
	h := sha256.New()
	read := &progressWriter{update: progress.Update{Step: "checking snapshot", Total: size - sha256.Size, Unit: progress.Bytes}, report: report}
	defer read.end()
	if _, err := io.CopyN(io.MultiWriter(h, read), r, size-sha256.Size); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	sum := make([]byte, sha256.Size)
	if _, err := io.ReadFull(r, sum); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("%s: %w", path, ErrCorrupt)
	}
	return nil
}

// CompressedSuffix ends a compressed snapshot's name (k3s's): a zip
// archive holding the snapshot under its name without the suffix.
const CompressedSuffix = ".zip"

// openSnapshot opens the snapshot at path, or the one a compressed
// snapshot holds, and returns its content's reader and size.
func openSnapshot(path string) (io.Reader, int64, func(), error) {
	if !strings.HasSuffix(path, CompressedSuffix) {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, nil, err
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, nil, err
		}
		return f, info.Size(), func() { f.Close() }, nil
	}
	z, err := zip.OpenReader(path)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	want := strings.TrimSuffix(filepath.Base(path), CompressedSuffix)
	for _, f := range z.File {
		if f.Name != want {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			z.Close()
			return nil, 0, nil, fmt.Errorf("%s: %w", path, err)
		}
		return rc, int64(f.UncompressedSize64), func() { rc.Close(); z.Close() }, nil
	}
	z.Close()
	return nil, 0, nil, fmt.Errorf("%s: the archive holds no snapshot %s: %w", path, want, ErrCorrupt)
}

// Compress replaces a snapshot by its compressed copy, <name>.zip,
// written aside, synced and renamed, then checked.
func Compress(snap Snapshot) (Snapshot, error) {
	final := snap.Path + CompressedSuffix
	tmp := final + tmpSuffix
	if err := writeZip(tmp, snap.Path); err != nil {
		_ = os.Remove(tmp)
		return Snapshot{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return Snapshot{}, err
	}
	if err := Verify(final, nil); err != nil {
		_ = os.Remove(final)
		return Snapshot{}, err
	}
	if err := os.Remove(snap.Path); err != nil {
		return Snapshot{}, err
	}
	info, err := os.Stat(final)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Name: filepath.Base(final), Path: final, Size: info.Size(), Created: snap.Created}, nil
}

// writeZip writes to path a zip archive of the file src under its name.
func writeZip(path, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	z := zip.NewWriter(out)
	w, err := z.CreateHeader(&zip.FileHeader{Name: filepath.Base(src), Method: zip.Deflate})
	if err == nil {
		_, err = io.Copy(w, in)
	}
	if err == nil {
		err = z.Close()
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// List returns the snapshots in dir, oldest first; a missing dir has none.
func List(dir string) ([]Snapshot, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []Snapshot
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), tmpSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, Snapshot{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Size: info.Size(), Created: info.ModTime()})
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Delete removes the snapshots named in dir; a name that is not a file of
// dir is an error.
func Delete(dir string, names ...string) error {
	for _, n := range names {
		if !filepath.IsLocal(n) || strings.ContainsRune(n, filepath.Separator) {
			return fmt.Errorf("%q is not a snapshot's name", n)
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// Prune deletes the oldest snapshots in dir whose name begins with prefix
// until retention are left, and returns those it deleted.
func Prune(dir, prefix string, retention int) ([]Snapshot, error) {
	all, err := List(dir)
	if err != nil {
		return nil, err
	}
	var deleted []Snapshot
	for _, old := range oldest(all, prefix, retention) {
		if err := os.Remove(old.Path); err != nil {
			return deleted, err
		}
		deleted = append(deleted, old)
	}
	return deleted, nil
}

// oldest is what a prune to retention deletes of all (oldest first): those
// whose name begins with prefix, but for the newest retention of them.
func oldest(all []Snapshot, prefix string, retention int) []Snapshot {
	var matching []Snapshot
	for _, s := range all {
		if strings.HasPrefix(s.Name, prefix+"-") {
			matching = append(matching, s)
		}
	}
	if len(matching) <= retention {
		return nil
	}
	return matching[:len(matching)-retention]
}

// Restore replaces the etcd data in etcdDir by the snapshot at path, as a
// new one-member cluster of the member name with peerURL; the data it
// replaces is kept aside (etcd.old-<unix time>) and put back if the
// restore fails. A corrupt snapshot is refused before anything changes.
// How much it has checked, then copied, goes to report.
func Restore(path, etcdDir, name, peerURL string, now time.Time, report progress.Func) (aside string, err error) {
	if err := Verify(path, report); err != nil {
		return "", err
	}
	if strings.HasSuffix(path, CompressedSuffix) {
		// etcd restores from a file: the archive's snapshot, beside
		// the etcd data, removed after.
		raw, err := extract(path, etcdDir+".restore"+tmpSuffix)
		if err != nil {
			return "", err
		}
		defer os.Remove(raw)
		path = raw
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(etcdDir); err == nil {
		aside = fmt.Sprintf("%s.old-%d", etcdDir, now.Unix())
		if err := os.Rename(etcdDir, aside); err != nil {
			return "", err
		}
	}
	// etcd copies the snapshot into the member's db file, then checks
	// and rewrites it: the file's size is how far the copy has come.
	stop := watchSize(filepath.Join(etcdDir, "member", "snap", "db"),
		progress.Update{Step: "restoring snapshot", Total: info.Size() - sha256.Size, Unit: progress.Bytes}, report)
	defer stop()
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        path,
		Name:                name,
		OutputDataDir:       etcdDir,
		PeerURLs:            []string{peerURL},
		InitialCluster:      name + "=" + peerURL,
		InitialClusterToken: "kubeboot",
		RevisionBump:        RevisionBump,
		MarkCompacted:       true,
	})
	if err != nil {
		_ = os.RemoveAll(etcdDir)
		if aside != "" {
			_ = os.Rename(aside, etcdDir)
		}
		return "", fmt.Errorf("restoring %s: %w", path, err)
	}
	return aside, nil
}

// extract writes the snapshot of the compressed snapshot at path to dst.
func extract(path, dst string) (string, error) {
	r, _, closeFn, err := openSnapshot(path)
	if err != nil {
		return "", err
	}
	defer closeFn()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		os.Remove(dst)
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return "", err
	}
	return dst, nil
}

// progressWriter reports the bytes written to it as update's Done.
type progressWriter struct {
	update progress.Update
	report progress.Func
}

func (w *progressWriter) Write(p []byte) (int, error) {
	w.update.Done += int64(len(p))
	w.report.Report(w.update)
	return len(p), nil
}

// end ends the step, however far it came.
func (w *progressWriter) end() {
	w.update.End = true
	w.report.Report(w.update)
}

// sizePollInterval is how often watchSize looks at the file.
const sizePollInterval = 100 * time.Millisecond

// watchSize reports the size of the file at path as update's Done, short
// of its Total until stop is called: the file is whole before its writer
// is done with it.
func watchSize(path string, update progress.Update, report progress.Func) (stop func()) {
	if report == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		wait.UntilWithContext(ctx, func(context.Context) {
			if info, err := os.Stat(path); err == nil {
				update.Done = min(info.Size(), update.Total-1)
			}
			report.Report(update)
		}, sizePollInterval)
	}()
	return func() {
		cancel()
		<-exited
		update.End = true
		report.Report(update)
	}
}
