package conformance

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// apt fetches Debian's packages, with every package they depend on, as if
// nothing were installed: its own package lists and an empty dpkg status,
// so the host's installed packages and its apt state play no part; only
// its sources (/etc/apt/sources.list*) do.
type apt struct {
	ctx  context.Context
	dir  string
	logf func(string, ...any)
	// updated says the lists were refreshed in this build.
	updated bool
}

// listsMaxAge is how old the package lists may be before a build fetches
// them again: older lists name package versions the mirror may have
// replaced.
const listsMaxAge = 24 * time.Hour

// options are apt-get's options for the build's own state, archives being
// where packages are downloaded to.
func (a *apt) options(archives string) []string {
	return []string{
		"-qq", "-y",
		"-o", "Dir::State::Lists=" + filepath.Join(a.dir, "lists"),
		"-o", "Dir::State::status=" + filepath.Join(a.dir, "status"),
		"-o", "Dir::Cache::archives=" + archives,
		"-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
		"-o", "APT::Install-Recommends=false",
		// The build's directories are root's, not apt's _apt user's.
		"-o", "APT::Sandbox::User=root",
	}
}

// prepare makes apt's directories and fetches the lists when they are
// missing or older than listsMaxAge.
func (a *apt) prepare() error {
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is needed to build the images from Debian's packages: %w", tool, err)
		}
	}
	for _, d := range []string{"lists/partial", "archives/partial"} {
		if err := os.MkdirAll(filepath.Join(a.dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(a.dir, "status"), nil, 0o644); err != nil {
		return err
	}
	if a.updated {
		return nil
	}
	// The lists keep the mirror's times: a stamp says when they came.
	stamp := filepath.Join(a.dir, "lists", "fetched")
	if st, err := os.Stat(stamp); err != nil || time.Since(st.ModTime()) > listsMaxAge {
		cmd := exec.CommandContext(a.ctx, "apt-get", append(a.options(filepath.Join(a.dir, "archives")), "update")...)
		if err := run(cmd); err != nil {
			return fmt.Errorf("fetching Debian's package lists: %w", err)
		}
		if err := os.WriteFile(stamp, nil, 0o644); err != nil {
			return err
		}
		a.logf("Debian's package lists fetched")
	}
	a.updated = true
	return nil
}

// fetch downloads pkgs and what they depend on, and returns the .deb
// files, in the order apt would install them.
func (a *apt) fetch(pkgs []string) ([]string, error) {
	if err := a.prepare(); err != nil {
		return nil, err
	}
	// --print-uris lists only what is not downloaded yet: asked with an
	// empty archive, it lists the whole closure.
	none, err := os.MkdirTemp(a.dir, "none-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(none)
	if err := os.MkdirAll(filepath.Join(none, "partial"), 0o755); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(a.ctx, "apt-get", append(append(a.options(none), "install", "--print-uris"), pkgs...)...)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("resolving Debian packages %v: %w%s", pkgs, err, stderrOf(err))
	}
	var debs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && strings.HasSuffix(fields[1], ".deb") {
			debs = append(debs, filepath.Join(a.dir, "archives", fields[1]))
		}
	}
	if len(debs) == 0 {
		return nil, fmt.Errorf("resolving Debian packages %v: apt-get names no package", pkgs)
	}
	archives := filepath.Join(a.dir, "archives")
	cmd = exec.CommandContext(a.ctx, "apt-get", append(append(a.options(archives), "install", "--download-only"), pkgs...)...)
	if err := run(cmd); err != nil {
		return nil, fmt.Errorf("downloading Debian packages %v: %w", pkgs, err)
	}
	for _, d := range debs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("downloading Debian packages %v: %w", pkgs, err)
		}
	}
	return debs, nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// rootfs is a root filesystem being put together, by path.
type rootfs map[string]file

// usrMerged are the top directories Debian's bookworm keeps under /usr,
// linked from /: packages still ship files under them.
var usrMerged = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// dropped are the trees an image has no use for.
var dropped = []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian"}

// clean is name as a path relative to the root, /bin and the like moved
// under /usr.
func clean(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	top, _, _ := strings.Cut(name, "/")
	if slices.Contains(usrMerged, top) {
		name = "usr/" + name
	}
	return name
}

// add adds what a package's data archive holds; hard links become copies.
func (fs rootfs) add(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := clean(h.Name)
		if name == "" || slices.ContainsFunc(dropped, func(d string) bool { return name == d || strings.HasPrefix(name, d+"/") }) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if _, ok := fs[name]; !ok {
				fs[name] = dir(name, h.Mode)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			fs[name] = regular(name, h.Mode, data)
		case tar.TypeSymlink:
			fs[name] = symlink(name, h.Linkname)
		case tar.TypeLink:
			target, ok := fs[clean(h.Linkname)]
			if !ok {
				return fmt.Errorf("%s: hard link to %s, not seen before it", name, h.Linkname)
			}
			fs[name] = regular(name, target.hdr.Mode, target.data)
		}
	}
}

// files is fs's entries, with /bin and the like linked to /usr's.
func (fs rootfs) files() []file {
	out := slices.Collect(maps.Values(fs))
	for _, top := range usrMerged {
		if _, ok := fs["usr/"+top]; ok {
			out = append(out, symlink(top, "usr/"+top))
		}
	}
	return out
}

// debianFiles is the root filesystem of Debian's packages pkgs and their
// dependencies, unpacked as dpkg would without running their scripts,
// with busybox's applets (Debian's static busybox) linked where no
// package put a command of that name if withBusybox.
func (b *builder) debianFiles(pkgs []string, withBusybox bool) (rootfs, error) {
	if withBusybox && !slices.Contains(pkgs, "busybox-static") {
		pkgs = append(slices.Clone(pkgs), "busybox-static")
	}
	debs, err := b.apt.fetch(pkgs)
	if err != nil {
		return nil, err
	}
	fs := rootfs{}
	for _, deb := range debs {
		cmd := exec.CommandContext(b.ctx, "dpkg-deb", "--fsys-tarfile", deb)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		addErr := fs.add(out)
		_, _ = io.Copy(io.Discard, out)
		if err := errors.Join(addErr, cmd.Wait()); err != nil {
			return nil, fmt.Errorf("unpacking %s: %w %s", filepath.Base(deb), err, stderr.String())
		}
	}
	if slices.Contains(pkgs, "busybox-static") {
		if err := b.linkApplets(fs); err != nil {
			return nil, err
		}
	}
	b.logf("Debian packages %v: %d packages, %d files", pkgs, len(debs), len(fs))
	return fs, nil
}

// linkApplets links busybox's applets, as `busybox --list-full` places
// them, to /usr/bin/busybox where fs has nothing of that name yet.
func (b *builder) linkApplets(fs rootfs) error {
	bb, ok := fs["usr/bin/busybox"]
	if !ok {
		return errors.New("busybox-static has no /bin/busybox")
	}
	tmp, err := os.CreateTemp(b.dir, "busybox-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(bb.data); err != nil {
		tmp.Close()
		return err
	}
	if err := errors.Join(tmp.Chmod(0o755), tmp.Close()); err != nil {
		return err
	}
	out, err := exec.CommandContext(b.ctx, tmp.Name(), "--list-full").Output()
	if err != nil {
		return fmt.Errorf("busybox --list-full: %w", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		name := clean(applet)
		if _, taken := fs[name]; !taken {
			fs[name] = symlink(name, "/usr/bin/busybox")
		}
	}
	return nil
}
