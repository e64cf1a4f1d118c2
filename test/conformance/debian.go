package conformance

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
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

// options are apt's options for the build's own state, archives being
// where packages are downloaded to.
func (a *apt) options(archives string) []string {
	return []string{
		"-o", "Dir::State::Lists=" + filepath.Join(a.dir, "lists"),
		"-o", "Dir::State::status=" + filepath.Join(a.dir, "status"),
		"-o", "Dir::Cache::archives=" + archives,
		"-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
		"-o", "APT::Install-Recommends=false",
		// The build's directories are root's, not apt's _apt user's.
		"-o", "APT::Sandbox::User=root",
	}
}

// aptGet is apt-get, quiet and answering yes, with options and args.
func (a *apt) aptGet(options []string, args ...string) *exec.Cmd {
	return exec.CommandContext(a.ctx, "apt-get", append(append([]string{"-qq", "-y"}, options...), args...)...)
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
		cmd := a.aptGet(a.options(filepath.Join(a.dir, "archives")), "update")
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
	cmd := a.aptGet(a.options(none), append([]string{"install", "--print-uris"}, pkgs...)...)
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
	cmd = a.aptGet(a.options(archives), append([]string{"install", "--download-only"}, pkgs...)...)
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

// applets says where an image has busybox's applets.
type applets int

const (
	// noApplets: no busybox.
	noApplets applets = iota
	// appletsAsListed: where `busybox --list-full` places them, as
	// Alpine has them.
	appletsAsListed
	// appletsInBin: all in /bin, as upstream's busybox image has them
	// (specs run /bin/sysctl).
	appletsInBin
)

// debianFiles is the root filesystem of Debian's packages pkgs and their
// dependencies, unpacked as dpkg would without running their scripts,
// with busybox's applets (Debian's static busybox) linked as a says where
// no package put a command of that name.
func (b *builder) debianFiles(pkgs []string, a applets) (rootfs, error) {
	if a != noApplets && !slices.Contains(pkgs, "busybox-static") {
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
	if a != noApplets {
		if err := b.linkApplets(fs, a); err != nil {
			return nil, err
		}
	}
	b.logf("Debian packages %v: %d packages, %d files", pkgs, len(debs), len(fs))
	return fs, nil
}

// linkApplets links busybox's applets, placed as a says, to
// /usr/bin/busybox where fs has nothing of that name yet.
func (b *builder) linkApplets(fs rootfs, a applets) error {
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
		if a == appletsInBin {
			applet = path.Join("bin", path.Base(applet))
		}
		name := clean(applet)
		if _, taken := fs[name]; !taken {
			fs[name] = symlink(name, "/usr/bin/busybox")
		}
	}
	return nil
}

// source downloads Debian's source package pkg (its .dsc, the upstream
// tarball and Debian's changes, each checked against the mirror's signed
// Sources index) from the mirrors the host's binary packages come from,
// and returns the upstream tarball's path.
func (a *apt) source(pkg string) (string, error) {
	if err := a.prepare(); err != nil {
		return "", err
	}
	// The host's sources, as apt sees them, with deb-src for each.
	out, err := exec.CommandContext(a.ctx, "apt-cache", append(a.options(filepath.Join(a.dir, "archives")), "policy")...).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache policy: %w%s", err, stderrOf(err))
	}
	var list []string
	for _, line := range strings.Split(string(out), "\n") {
		// " 500 http://deb.debian.org/debian bookworm/main amd64 Packages"
		f := strings.Fields(line)
		if len(f) != 5 || f[4] != "Packages" {
			continue
		}
		suite, component, ok := strings.Cut(f[2], "/")
		entry := "deb-src " + f[1] + " " + suite + " " + component
		if ok && !slices.Contains(list, entry) {
			list = append(list, entry)
		}
	}
	if len(list) == 0 {
		return "", fmt.Errorf("source package %s: apt names no Debian mirror", pkg)
	}
	dir := filepath.Join(a.dir, "source")
	for _, d := range []string{dir, filepath.Join(a.dir, "source-lists", "partial")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	sources := filepath.Join(a.dir, "sources.list")
	if err := os.WriteFile(sources, []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	opts := append(a.options(filepath.Join(a.dir, "archives")),
		"-o", "Dir::Etc::sourcelist="+sources, "-o", "Dir::Etc::sourceparts=-",
		"-o", "Dir::State::Lists="+filepath.Join(a.dir, "source-lists"))
	if err := run(a.aptGet(opts, "update")); err != nil {
		return "", fmt.Errorf("fetching Debian's source lists: %w", err)
	}
	cmd := a.aptGet(opts, "source", "--download-only", pkg)
	cmd.Dir = dir
	if err := run(cmd); err != nil {
		return "", fmt.Errorf("downloading Debian's source package %s: %w", pkg, err)
	}
	tarballs, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.orig.tar.*"))
	if len(tarballs) == 0 {
		return "", fmt.Errorf("source package %s: no upstream tarball in %s", pkg, dir)
	}
	slices.Sort(tarballs)
	return tarballs[len(tarballs)-1], nil
}

// untar unpacks the tarball (gzip or bzip2) into dir and returns the top
// directory it holds.
func untar(tarball, dir string) (string, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var r io.Reader
	switch {
	case strings.HasSuffix(tarball, ".bz2"):
		r = bzip2.NewReader(f)
	case strings.HasSuffix(tarball, ".gz"):
		gz, err := gzip.NewReader(f)
		if err != nil {
			return "", err
		}
		r = gz
	default:
		return "", fmt.Errorf("%s: not a gzip or bzip2 tarball", filepath.Base(tarball))
	}
	tr := tar.NewReader(r)
	top := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return top, nil
		}
		if err != nil {
			return "", err
		}
		name := path.Clean(h.Name)
		if !filepath.IsLocal(name) {
			return "", fmt.Errorf("%s: entry %q leaves the directory", filepath.Base(tarball), h.Name)
		}
		if top == "" {
			top, _, _ = strings.Cut(name, "/")
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				err = writeFile(target, tr, os.FileMode(h.Mode)&0o777)
			}
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				err = os.Symlink(h.Linkname, target)
			}
		}
		if err != nil {
			return "", err
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}
