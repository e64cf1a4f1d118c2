package conformance

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"path"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestImages builds the images and checks, without running them, what
// the specs rely on: every name the suite pulls is there; each image's
// entrypoint, and the commands the specs call in it, resolve (through
// the image's own links) to the program upstream's image has; and every
// dynamically linked program and library finds its loader and each
// library it needs inside the image.
func TestImages(t *testing.T) {
	requireTools(t)
	p, err := layout.FromPath(builtImages(t.Context(), t))
	if err != nil {
		t.Fatal(err)
	}
	index, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]v1.Image{}
	for _, d := range manifest.Manifests {
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		images[d.Annotations[imageRefName]] = img
	}
	for _, ref := range Images() {
		if images[ref] == nil {
			t.Errorf("image %s is not in the layout", ref)
		}
	}

	// The commands the specs run in the images, and the program each must
	// be (the file its links lead to).
	commands := map[string]map[string]string{
		e2eRegistry + "/agnhost:2.66.1": {
			"sh": "/usr/bin/sh", "nc": "/usr/bin/nc.openbsd", "dig": "/usr/bin/dig", "curl": "/usr/bin/curl",
			"getent": "/usr/bin/getent", "ss": "/usr/bin/ss", "bash": "/usr/bin/bash", "socat": "/usr/bin/socat",
			"iperf": "/usr/bin/iperf", "ipcs": "/usr/bin/ipcs", "seq": "/usr/bin/busybox",
			"/agnhost-2": "/agnhost", "/localhost.crt": "/localhost.crt",
		},
		e2eRegistry + "/kitten:1.8":              {"/kitten.jpg": "/kitten.jpg", "/data.json": "/data.json"},
		e2eRegistry + "/busybox:1.37.0-2":        {"sh": "/usr/bin/sh", "env": "/usr/bin/busybox", "wget": "/usr/bin/busybox", "nslookup": "/usr/bin/busybox", "/bin/sysctl": "/usr/bin/busybox"},
		e2eRegistry + "/nginx:1.27.0-2":          {"nginx": "/usr/sbin/nginx", "sh": "/usr/bin/busybox"},
		e2eRegistry + "/glibc-dns-testing:2.1.1": {"sh": "/usr/bin/dash", "dig": "/usr/bin/dig", "getent": "/usr/bin/getent", "hostname": "/usr/bin/hostname"},
		e2eRegistry + "/nonewprivs:1.4":          {"nnp": "/usr/local/bin/nnp"},
	}
	for ref, img := range images {
		t.Run(ref, func(t *testing.T) {
			fs := flatten(t, img)
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			argv := append(slices.Clone(cfg.Config.Entrypoint), cfg.Config.Cmd...)
			if len(argv) == 0 {
				t.Fatal("no entrypoint or command")
			}
			if _, ok := fs.command(argv[0]); !ok {
				t.Errorf("the image runs %q, which it does not have", argv[0])
			}
			for cmd, want := range commands[ref] {
				if got, ok := fs.command(cmd); !ok || got != want {
					t.Errorf("%s is %q (found: %v), want %s", cmd, got, ok, want)
				}
			}
			fs.checkLinking(t)
		})
	}
	if nnp := flatten(t, images[e2eRegistry+"/nonewprivs:1.4"]).entries["usr/local/bin/nnp"]; nnp == nil || nnp.hdr.Mode&0o4000 == 0 {
		t.Errorf("nonewprivs's nnp is not setuid: %+v", nnp)
	}
}

// imageFS is an image's root filesystem, by path relative to /.
type imageFS struct {
	entries map[string]*entry
	path    []string
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// flatten reads img's layers, merged.
func flatten(t *testing.T, img v1.Image) *imageFS {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	fs := &imageFS{entries: map[string]*entry{}, path: []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}}
	for _, e := range cfg.Config.Env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			fs.path = strings.Split(p, ":")
		}
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		e := &entry{hdr: h}
		if h.Typeflag == tar.TypeReg && isELFCandidate(h.Name) {
			if e.data, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
		fs.entries[strings.Trim(path.Clean("/"+h.Name), "/")] = e
	}
	return fs
}

// isELFCandidate says whether a file is worth reading as a program or a
// library.
func isELFCandidate(name string) bool {
	return strings.Contains(name, "bin/") || strings.Contains(name, "lib") || !strings.Contains(name, "/")
}

// resolve follows links in p (absolute) and returns the path of what it
// names, and whether that exists.
func (fs *imageFS) resolve(p string) (string, bool) {
	parts := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	for hops := 0; hops < 64; hops++ {
		restarted := false
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			e, ok := fs.entries[prefix]
			if !ok {
				return "/" + strings.Join(parts, "/"), false
			}
			if e.hdr.Typeflag == tar.TypeSymlink {
				target := e.hdr.Linkname
				if !path.IsAbs(target) {
					target = path.Join("/", path.Dir("/"+prefix), target)
				}
				parts = append(strings.Split(strings.Trim(path.Clean(target), "/"), "/"), parts[i+1:]...)
				restarted = true
				break
			}
		}
		if !restarted {
			return "/" + strings.Join(parts, "/"), true
		}
	}
	return p, false
}

// command is the file cmd runs: itself if it has a slash, else the first
// in the image's PATH.
func (fs *imageFS) command(cmd string) (string, bool) {
	if strings.Contains(cmd, "/") {
		return fs.resolve(cmd)
	}
	for _, dir := range fs.path {
		if got, ok := fs.resolve(path.Join(dir, cmd)); ok {
			return got, true
		}
	}
	return "", false
}

// libraryDirs are where Debian's loader looks without an ld.so.cache.
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib", "/lib64", "/usr/lib64"}

// checkLinking checks that each dynamically linked program (in a bin
// directory, or at /) finds its loader and the libraries it needs, and
// those the libraries need, as the loader would search them.
func (fs *imageFS) checkLinking(t *testing.T) {
	t.Helper()
	checked := map[string]bool{}
	var check func(name, from string)
	check = func(name, from string) {
		if checked[name] {
			return
		}
		checked[name] = true
		f, err := elf.NewFile(bytes.NewReader(fs.entries[name].data))
		if err != nil {
			t.Errorf("/%s (needed by %s): %v", name, from, err)
			return
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type != elf.PT_INTERP {
				continue
			}
			interp, _ := io.ReadAll(prog.Open())
			loader := strings.TrimRight(string(interp), "\x00")
			if _, ok := fs.resolve(loader); !ok {
				t.Errorf("/%s: its loader %s is missing", name, loader)
			}
		}
		libs, _ := f.ImportedLibraries()
		for _, lib := range libs {
			found := ""
			for _, dir := range libraryDirs {
				if p, ok := fs.resolve(path.Join(dir, lib)); ok {
					found = strings.TrimPrefix(p, "/")
					break
				}
			}
			if found == "" {
				t.Errorf("/%s needs %s, which the image lacks", name, lib)
				continue
			}
			check(found, "/"+name)
		}
	}
	for name, e := range fs.entries {
		if isProgram(name) && bytes.HasPrefix(e.data, []byte(elf.ELFMAG)) {
			check(name, "")
		}
	}
}

// isProgram says whether a path is where programs are.
func isProgram(name string) bool {
	return strings.Contains(name, "bin/") || !strings.Contains(name, "/")
}

// TestBuildImagesUnknownRef: asked for an image it does not build,
// BuildImages says which before building anything.
func TestBuildImagesUnknownRef(t *testing.T) {
	_, err := BuildImages(t.Context(), ModuleRoot(t), t.TempDir(), []string{cyclonusWorkerImage, "registry.k8s.io/nope:1"}, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "registry.k8s.io/nope:1") {
		t.Errorf("BuildImages of an unknown image: %v, want an error naming it", err)
	}
}
