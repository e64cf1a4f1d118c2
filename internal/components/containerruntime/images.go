package containerruntime

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"k8s.io/klog/v2"
)

// importedFileName records, beside containerd's root, which air-gap
// tarballs were imported and what each held.
const importedFileName = "images-imported.json"

// CRINamespace is the containerd namespace of the CRI plugin, where the
// kubelet's images and containers are.
const CRINamespace = "k8s.io"

// imageSuffixes are the air-gap tarballs' names: an image archive
// (docker save's or an OCI layout's), plain or compressed.
var imageSuffixes = []string{".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd"}

// imported is what was imported from one tarball.
type imported struct {
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
	Images  []string  `json:"images"`
}

// imageStore is the runtime's image store, as importImages uses it.
type imageStore interface {
	// Import imports the archive r and unpacks its images for the
	// snapshotter, returning their names.
	Import(ctx context.Context, r io.Reader) ([]string, error)
	// Has reports whether the store holds the image name.
	Has(ctx context.Context, name string) bool
}

// importImages imports the tarballs in dir into the runtime at socket,
// each only if it changed since its last import (state records them) or
// an image it held is gone; then, if the runtime still lacks the sandbox
// image pause and it is the one the binary carries, that one. A tarball
// that cannot be read or imported is named in the log and skipped: the
// node still starts.
func importImages(ctx context.Context, socket, dir, state, snapshotter, pause string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the air-gap images: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && slices.ContainsFunc(imageSuffixes, func(s string) bool { return strings.HasSuffix(e.Name(), s) }) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	carried := pause == DefaultPauseImage && len(pauseArchive) > 0
	if len(files) == 0 && !carried {
		return nil
	}
	store, closeStore, err := newImageStore(socket, snapshotter)
	if err != nil {
		return err
	}
	defer closeStore()
	if len(files) > 0 {
		if err := importFiles(ctx, store, files, state); err != nil {
			return err
		}
	}
	if carried {
		return importPause(ctx, store, pause)
	}
	return nil
}

// importPause imports the sandbox image the binary carries (pause), if
// store lacks it.
func importPause(ctx context.Context, store imageStore, pause string) error {
	if store.Has(ctx, pause) {
		return nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(pauseArchive))
	if err != nil {
		return fmt.Errorf("the sandbox image the binary carries: %w", err)
	}
	images, err := store.Import(ctx, zr)
	if err != nil {
		return fmt.Errorf("importing the sandbox image the binary carries: %w", err)
	}
	klog.FromContext(ctx).Info("Imported the sandbox image the binary carries", "images", images)
	return nil
}

// importFiles imports files into store, as importImages.
func importFiles(ctx context.Context, store imageStore, files []string, state string) error {
	logger := klog.FromContext(ctx)
	done := map[string]imported{}
	if data, err := os.ReadFile(state); err == nil {
		// A record that does not parse only costs an import again.
		_ = json.Unmarshal(data, &done)
	}
	next := map[string]imported{}
	for _, path := range files {
		info, err := os.Stat(path)
		if err != nil {
			logger.Error(err, "Skipping an air-gap image tarball", "file", path)
			continue
		}
		name := filepath.Base(path)
		if prev, ok := done[name]; ok && prev.Size == info.Size() && prev.ModTime.Equal(info.ModTime()) &&
			!slices.ContainsFunc(prev.Images, func(image string) bool { return !store.Has(ctx, image) }) {
			next[name] = prev
			continue
		}
		start := time.Now()
		images, err := importFile(ctx, store, path)
		if err != nil {
			logger.Error(err, "Skipping an air-gap image tarball that cannot be imported", "file", path)
			continue
		}
		logger.Info("Imported air-gap images", "file", path, "images", images, "took", time.Since(start))
		next[name] = imported{Size: info.Size(), ModTime: info.ModTime(), Images: images}
	}
	data, err := json.Marshal(next)
	if err != nil {
		return err
	}
	return os.WriteFile(state, data, 0o600)
}

// importFile imports one tarball, decompressed by its name.
func importFile(ctx context.Context, store imageStore, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	switch {
	case strings.HasSuffix(path, ".gz"), strings.HasSuffix(path, ".tgz"):
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("not gzip: %w", err)
		}
		defer gz.Close()
		r = gz
	case strings.HasSuffix(path, ".zst"), strings.HasSuffix(path, ".zstd"):
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("not zstd: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	images, err := store.Import(ctx, r)
	if err != nil {
		return nil, err
	}
	if len(images) == 0 {
		return nil, errors.New("no image in the archive")
	}
	return images, nil
}
