package containerruntime

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pelletier/go-toml/v2"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"defaults", func(*Options) {}, ""},
		{"an external runtime", func(o *Options) { o.Endpoint = "unix:///run/crio/crio.sock" }, ""},
		{"native", func(o *Options) { o.Snapshotter = "native" }, ""},
		{"an endpoint that is no socket", func(o *Options) { o.Endpoint = "/run/crio/crio.sock" }, "--container-runtime-endpoint"},
		{"an unknown snapshotter", func(o *Options) { o.Snapshotter = "zfs" }, "--snapshotter \"zfs\""},
		{"no pause image", func(o *Options) { o.PauseImage = "" }, "--pause-image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.set(o)
			err := o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestRenderConfig reads the configuration back as containerd does (TOML)
// and checks what a node depends on.
func TestRenderConfig(t *testing.T) {
	data, err := renderConfig(configValues{
		Root: "/d/containerd/root", State: "/d/containerd/state", Socket: "/d/containerd/containerd.sock",
		Snapshotter: "native", PauseImage: "example.test/pause:1", CNIBinDirs: []string{"/opt/cni/bin", "/usr/lib/cni"},
		CNIConfDir: "/etc/cni/net.d", RegistryConfigDir: "/d/containerd/certs.d", RestrictOOMScoreAdj: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version int    `toml:"version"`
		Root    string `toml:"root"`
		State   string `toml:"state"`
		GRPC    struct {
			Address string `toml:"address"`
		} `toml:"grpc"`
		Plugins struct {
			Images struct {
				Snapshotter  string            `toml:"snapshotter"`
				PinnedImages map[string]string `toml:"pinned_images"`
				Registry     struct {
					ConfigPath string `toml:"config_path"`
				} `toml:"registry"`
			} `toml:"io.containerd.cri.v1.images"`
			Runtime struct {
				RestrictOOMScoreAdj bool `toml:"restrict_oom_score_adj"`
				CNI                 struct {
					BinDirs []string `toml:"bin_dirs"`
					ConfDir string   `toml:"conf_dir"`
				} `toml:"cni"`
				Containerd struct {
					Runtimes map[string]struct {
						Type string `toml:"runtime_type"`
					} `toml:"runtimes"`
				} `toml:"containerd"`
			} `toml:"io.containerd.cri.v1.runtime"`
			NRI struct {
				Disable bool `toml:"disable"`
			} `toml:"io.containerd.nri.v1.nri"`
		} `toml:"plugins"`
	}
	if err := toml.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	p := got.Plugins
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"version", got.Version, 3},
		{"root", got.Root, "/d/containerd/root"},
		{"state", got.State, "/d/containerd/state"},
		{"grpc.address", got.GRPC.Address, "/d/containerd/containerd.sock"},
		{"snapshotter", p.Images.Snapshotter, "native"},
		{"sandbox image", p.Images.PinnedImages["sandbox"], "example.test/pause:1"},
		{"registry config_path", p.Images.Registry.ConfigPath, "/d/containerd/certs.d"},
		{"restrict_oom_score_adj", p.Runtime.RestrictOOMScoreAdj, true},
		{"cni bin_dirs", strings.Join(p.Runtime.CNI.BinDirs, ","), "/opt/cni/bin,/usr/lib/cni"},
		{"cni conf_dir", p.Runtime.CNI.ConfDir, "/etc/cni/net.d"},
		{"runc runtime", p.Runtime.Containerd.Runtimes["runc"].Type, "io.containerd.runc.v2"},
		{"NRI disabled", p.NRI.Disable, true},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v\n%s", c.name, c.got, c.want, data)
		}
	}
}

// TestClaimSocket: a socket another process serves is refused, a stale
// one removed.
func TestClaimSocket(t *testing.T) {
	dir := t.TempDir()
	if err := claimSocket(filepath.Join(dir, "none.sock")); err != nil {
		t.Errorf("no socket: %v", err)
	}
	served := filepath.Join(dir, "served.sock")
	l, err := net.Listen("unix", served)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := claimSocket(served); err == nil || !strings.Contains(err.Error(), "another containerd serves "+served) {
		t.Errorf("a served socket: %v, want it refused", err)
	}
	stale := filepath.Join(dir, "stale.sock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := claimSocket(stale); err != nil {
		t.Errorf("a stale socket: %v", err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("the stale socket %s is still there", stale)
	}
}

// fakeStore is an image store whose archives are text: one image name a
// line, "corrupt" for an archive that fails to import.
type fakeStore struct {
	images  map[string]bool
	imports int
}

func (s *fakeStore) Import(_ context.Context, r io.Reader) ([]string, error) {
	s.imports++
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(data), "corrupt") {
		return nil, errors.New("unexpected EOF")
	}
	names := strings.Fields(string(data))
	for _, n := range names {
		s.images[n] = true
	}
	return names, nil
}

func (s *fakeStore) Has(_ context.Context, name string) bool { return s.images[name] }

// TestImportFiles: each tarball is imported once, again only when it
// changes or its images are gone; compressed ones are read through their
// compression; a corrupt one is skipped and the others still imported.
func TestImportFiles(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var gz, zst bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write([]byte("example.test/b:1"))
	gw.Close()
	zw, _ := zstd.NewWriter(&zst)
	zw.Write([]byte("example.test/c:1"))
	zw.Close()
	files := []string{
		write("a.tar", []byte("example.test/a:1 example.test/a:2")),
		write("b.tar.gz", gz.Bytes()),
		write("c.tar.zst", zst.Bytes()),
		write("corrupt.tar", []byte("corrupt")),
		write("notgzip.tar.gz", []byte("example.test/d:1")),
	}
	store := &fakeStore{images: map[string]bool{}}
	ctx := context.Background()
	if err := importFiles(ctx, store, files, state); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"example.test/a:1", "example.test/a:2", "example.test/b:1", "example.test/c:1"} {
		if !store.images[n] {
			t.Errorf("image %s not imported", n)
		}
	}
	if store.images["example.test/d:1"] {
		t.Errorf("a .tar.gz that is not gzip was imported")
	}

	t.Run("unchanged tarballs are not imported again", func(t *testing.T) {
		before := store.imports
		if err := importFiles(ctx, store, files, state); err != nil {
			t.Fatal(err)
		}
		// Only the corrupt one is tried again (the one not gzip fails
		// before the store).
		if got := store.imports - before; got != 1 {
			t.Errorf("%d imports on a second start, want 1 (the corrupt tarball)", got)
		}
	})

	t.Run("a changed tarball is imported again", func(t *testing.T) {
		write("a.tar", []byte("example.test/a:3"))
		future := time.Now().Add(time.Minute)
		os.Chtimes(files[0], future, future)
		if err := importFiles(ctx, store, files, state); err != nil {
			t.Fatal(err)
		}
		if !store.images["example.test/a:3"] {
			t.Errorf("the changed a.tar was not imported again")
		}
	})

	t.Run("a tarball whose image is gone is imported again", func(t *testing.T) {
		delete(store.images, "example.test/c:1")
		if err := importFiles(ctx, store, files, state); err != nil {
			t.Fatal(err)
		}
		if !store.images["example.test/c:1"] {
			t.Errorf("c.tar.zst was not imported again after its image was removed")
		}
	})
}

// TestCNIBinDirs: kubeboot's pod network needs every plugin in one
// directory, and the error says which package brings them.
func TestCNIBinDirs(t *testing.T) {
	saved := cniPluginDirs
	t.Cleanup(func() { cniPluginDirs = saved })
	empty, full := t.TempDir(), t.TempDir()
	for _, p := range cniPlugins {
		if err := os.WriteFile(filepath.Join(full, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cniPluginDirs = []string{empty, filepath.Join(empty, "missing")}
	if _, err := cniBinDirs(true); err == nil || !strings.Contains(err.Error(), "containernetworking-plugins") {
		t.Errorf("no plugins: %v, want an error naming the package", err)
	}
	if dirs, err := cniBinDirs(false); err != nil || len(dirs) != 1 || dirs[0] != empty {
		t.Errorf("no plugins, none required: %v, %v; want [%s]", dirs, err, empty)
	}
	cniPluginDirs = []string{empty, full}
	if dirs, err := cniBinDirs(true); err != nil || len(dirs) != 2 {
		t.Errorf("plugins in %s: %v, %v; want both directories", full, dirs, err)
	}
}

// TestHostChecks: a host without runc, or whose CNI plugins are missing,
// is refused before anything is written, naming what to install.
func TestHostChecks(t *testing.T) {
	saved := cniPluginDirs
	t.Cleanup(func() { cniPluginDirs = saved })
	bin, plugins := t.TempDir(), t.TempDir()
	cniPluginDirs = []string{plugins}
	dir := filepath.Join(t.TempDir(), "node")
	o := NewOptions()

	t.Setenv("PATH", bin)
	if _, err := o.config(Node{Dir: dir, CNIConfDir: "/etc/cni/net.d"}); err == nil || !strings.Contains(err.Error(), "runc is not installed") {
		t.Errorf("no runc: %v, want an error naming runc", err)
	}
	if err := os.WriteFile(filepath.Join(bin, "runc"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := o.config(Node{Dir: dir, CNI: true, CNIConfDir: "/etc/cni/net.d"}); err == nil || !strings.Contains(err.Error(), "containernetworking-plugins") {
		t.Errorf("no CNI plugins: %v, want an error naming the package", err)
	}
	if _, err := o.config(Node{Dir: dir, CNIConfDir: "/etc/cni/net.d"}); err != nil {
		t.Errorf("runc, and no pod network of kubeboot's: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the checks wrote %s", dir)
	}
}

// TestInstallShim: the embedded lean shim is written once and rewritten
// only when it differs (a larger, a smaller or a changed file, or the old
// link to this binary); without one, the shim is a link to this binary.
func TestInstallShim(t *testing.T) {
	shim := bytes.Repeat([]byte("shim"), 40_000) // not a multiple of the compare buffer
	lean := func(data []byte) func() (fs.File, bool, error) {
		return func() (fs.File, bool, error) {
			f, err := fstest.MapFS{"shim": {Data: data, Mode: 0o755}}.Open("shim")
			return f, true, err
		}
	}
	none := func() (fs.File, bool, error) { return nil, false, nil }
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Clone(shim)
	changed[len(changed)-1] = 'x'
	for _, tc := range []struct {
		name   string
		before func(path string) error
		open   func() (fs.File, bool, error)
		// kept: the file there is left as it is, not rewritten.
		kept bool
	}{
		{"fresh", func(string) error { return nil }, lean(shim), false},
		{"same", func(p string) error { return os.WriteFile(p, shim, 0o755) }, lean(shim), true},
		{"changed", func(p string) error { return os.WriteFile(p, changed, 0o755) }, lean(shim), false},
		{"shorter", func(p string) error { return os.WriteFile(p, shim[:100], 0o755) }, lean(shim), false},
		{"longer", func(p string) error { return os.WriteFile(p, append(bytes.Clone(shim), 0), 0o755) }, lean(shim), false},
		{"the old link", func(p string) error { return os.Symlink(exe, p) }, lean(shim), false},
		{"no lean shim", func(string) error { return nil }, none, false},
		{"no lean shim, a lean one there", func(p string) error { return os.WriteFile(p, shim, 0o755) }, none, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "containerd-shim-runc-v2")
			if err := tc.before(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Lstat(path)
			if err := installShim(dir, tc.open); err != nil {
				t.Fatalf("installShim: %v", err)
			}
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if kept := before != nil && os.SameFile(before, fi) && before.Mode() == fi.Mode(); kept != tc.kept {
				t.Errorf("the file there kept: %v, want %v", kept, tc.kept)
			}
			if _, ok, _ := tc.open(); !ok {
				if target, err := os.Readlink(path); err != nil || target != exe {
					t.Fatalf("shim is %v (%v), want a link to %s", fi.Mode(), err, exe)
				}
				return
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, shim) || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
				t.Fatalf("shim: %d bytes, mode %v, %v; want the lean shim's %d bytes, executable", len(got), fi.Mode(), err, len(shim))
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%d files in the shim's directory, want only the shim", len(entries))
			}
		})
	}
}
