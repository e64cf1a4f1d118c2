//go:build linux && amd64

package containerruntime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestCarriedPause: the binary carries DefaultPauseImage, upstream's
// static pause as its entrypoint, run as 65535; a runtime that lacks it
// imports it, and one that has it does not.
func TestCarriedPause(t *testing.T) {
	files := map[string][]byte{}
	zr, err := gzip.NewReader(bytes.NewReader(pauseArchive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json %q: %v", files["manifest.json"], err)
	}
	if !slices.Equal(manifest[0].RepoTags, []string{DefaultPauseImage}) || len(manifest[0].Layers) != 1 {
		t.Errorf("the archive holds %v in %d layers, want %s in one (the go:generate line's -image is DefaultPauseImage)",
			manifest[0].RepoTags, len(manifest[0].Layers), DefaultPauseImage)
	}
	var config struct {
		Config struct {
			Entrypoint []string
			User       string
		} `json:"config"`
	}
	if err := json.Unmarshal(files[manifest[0].Config], &config); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(config.Config.Entrypoint, []string{"/pause"}) || config.Config.User != "65535:65535" {
		t.Errorf("the image's config %+v, want /pause as 65535", config.Config)
	}
	lz, err := gzip.NewReader(bytes.NewReader(files[manifest[0].Layers[0]]))
	if err != nil {
		t.Fatalf("the layer: %v", err)
	}
	layer := tar.NewReader(lz)
	h, err := layer.Next()
	if err != nil || h.Name != "pause" {
		t.Fatalf("the layer's first file %v, %v; want pause", h, err)
	}
	pause, err := io.ReadAll(layer)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := elf.NewFile(bytes.NewReader(pause))
	if err != nil {
		t.Fatalf("pause is no ELF executable: %v", err)
	}
	if exe.Machine != elf.EM_X86_64 || slices.ContainsFunc(exe.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		t.Errorf("pause: machine %v, or it is not static", exe.Machine)
	}

	for _, has := range []bool{false, true} {
		store := &recordingStore{has: has}
		if err := importPause(context.Background(), store, DefaultPauseImage); err != nil {
			t.Fatal(err)
		}
		if imported := strings.Contains(store.got, "manifest.json"); imported == has {
			t.Errorf("a runtime that has the image: %t; the archive imported: %t", has, imported)
		}
	}
}

// recordingStore records the names of the files of the archive it
// imports.
type recordingStore struct {
	has bool
	got string
}

func (s *recordingStore) Import(_ context.Context, r io.Reader) ([]string, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return []string{DefaultPauseImage}, nil
		}
		if err != nil {
			return nil, err
		}
		s.got += h.Name + " "
	}
}

func (s *recordingStore) Has(context.Context, string) bool { return s.has }
