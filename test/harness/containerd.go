package harness

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/internal/components/containerruntime"
)

// Images EmbeddedContainerd puts in a node's air-gap images: the first two
// hold testcontainer (./testcontainer) at /testcontainer. They are made on the
// machine and never pulled; Pods must use them with imagePullPolicy Never.
const (
	// PauseImage is the runtime's sandbox image: testcontainer pause.
	PauseImage = "kubeboot.test/pause:1"
	// TestImage runs testcontainer with the container's arguments.
	TestImage = "kubeboot.test/testcontainer:1"
	// TestImageCommand is TestImage's entrypoint, for exec.
	TestImageCommand = "/testcontainer"
	// DataImage holds one file, DataImageFile, saying DataImageMessage:
	// an image for image volumes.
	DataImage        = "kubeboot.test/data:1"
	DataImageFile    = "/message"
	DataImageMessage = "from an image volume"
)

// EmbeddedContainerd readies the test's mount namespace for a node in
// nodeDir on kubeboot's embedded containerd, and returns the node's flags
// for it: the test images (PauseImage, TestImage, DataImage) are in the node's
// air-gap images, which the node imports before its kubelet starts, and
// PauseImage is its sandbox image. When the test ends, the containers'
// shims are killed (they outlive containerd by design) and what the
// runtime mounted under nodeDir is detached.
//
// Call it inside the test's network and mount namespace (InNetNS), and
// RequireContainerd before entering it: it mounts tmpfs over
// /run/containerd, /run/netns and CNIConfDir, where the runtime keeps
// its shims' sockets and the Pods' network namespaces and reads its
// network, so nothing of it outlives the namespace.
func EmbeddedContainerd(t testing.TB, nodeDir string) []string {
	t.Helper()
	RequireContainerd(t)
	for _, dir := range []string{"/run/containerd", "/run/netns"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
			t.Fatalf("mount tmpfs on %s: %v", dir, err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	}
	privateDir(t, CNIConfDir)
	images := filepath.Join(nodeDir, "images")
	if err := os.MkdirAll(images, 0o700); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(buildTestContainer(t))
	if err != nil {
		t.Fatal(err)
	}
	testcontainer := map[string][]byte{TestImageCommand: bin}
	for _, img := range []struct {
		ref        string
		files      map[string][]byte
		entrypoint []string
	}{
		{PauseImage, testcontainer, []string{TestImageCommand, "pause"}},
		{TestImage, testcontainer, []string{TestImageCommand}},
		{DataImage, map[string][]byte{DataImageFile: []byte(DataImageMessage)}, nil},
	} {
		if err := writeImage(ImageArchive(nodeDir, img.ref), img.ref, img.files, img.entrypoint); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// The kubelet and containerd have gone by now, so nothing would
		// stop the containers.
		killShims(filepath.Join(nodeDir, "containerd", "containerd.sock"))
		// What the runtime mounted for Pods still there (their
		// sandboxes' shm, the snapshots) goes with it, so that the
		// test's directory can be removed.
		unmountUnder(nodeDir)
	})
	return []string{"--pause-image=" + PauseImage}
}

// WriteTestImage writes, among the air-gap images of the node in nodeDir,
// an image ref of TestImageCommand (its entrypoint) and files, which the
// node imports when it starts.
func WriteTestImage(t testing.TB, nodeDir, ref string, files map[string][]byte) {
	t.Helper()
	bin, err := os.ReadFile(buildTestContainer(t))
	if err != nil {
		t.Fatal(err)
	}
	files = maps.Clone(files)
	files[TestImageCommand] = bin
	if err := os.MkdirAll(filepath.Join(nodeDir, "images"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeImage(ImageArchive(nodeDir, ref), ref, files, []string{TestImageCommand}); err != nil {
		t.Fatal(err)
	}
}

// ImageArchive is where EmbeddedContainerd writes the archive of the
// image ref for the node in nodeDir.
func ImageArchive(nodeDir, ref string) string {
	return filepath.Join(nodeDir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
}

// RequireContainerd skips the test, or fails it when CI=true, unless the
// host has what kubeboot's embedded containerd needs of it
// (containerruntime.CheckHost): runc and the pod network's CNI plugins.
func RequireContainerd(t testing.TB) {
	t.Helper()
	if err := containerruntime.CheckHost(true); err != nil {
		skipOrFail(t, err.Error())
	}
}

// buildTestContainer builds ./testcontainer, static, into the test's
// temporary directory. It needs only the standard library, so it builds
// without the module proxy (inside a network namespace too).
func buildTestContainer(t testing.TB) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "testcontainer")
	cmd := exec.Command("go", "build", "-o", out, "./test/harness/testcontainer")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOPROXY=off", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building testcontainer: %v\n%s", err, b)
	}
	return out
}

// writeImage writes an image archive as `docker save` does, which
// containerd imports: one layer holding files (by absolute path, mode
// 0755), tagged ref, with entrypoint.
func writeImage(path, ref string, files map[string][]byte, entrypoint []string) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		content := files[name]
		if err := lw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(name, "/"), Mode: 0o755, Size: int64(len(content)),
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := lw.Write(content); err != nil {
			return err
		}
	}
	if err := lw.Close(); err != nil {
		return err
	}
	diffID := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{ref}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := tar.NewWriter(f)
	for _, file := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {"config.json", config}, {"layer.tar", layer.Bytes()}} {
		if err := w.WriteHeader(&tar.Header{Name: file.name, Mode: 0o644, Size: int64(len(file.data)),
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := w.Write(file.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// killShims kills the runc shims of the containerd at sock, and the
// containers they run (each container's first process, whose end ends
// its PID namespace). A shim is named by its link or, once it has started
// itself anew, by kubeboot's binary: it is known by its address.
func killShims(sock string) {
	procs := Processes()
	for pid, p := range procs {
		if !slices.Contains(p.Args, "-address") || !slices.Contains(p.Args, sock) {
			continue
		}
		for child, c := range procs {
			if c.Parent == pid {
				_ = syscall.Kill(child, syscall.SIGKILL)
			}
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// unmountUnder detaches every mount at or under dir, deepest first.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		// The fifth field is the mount point.
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}
