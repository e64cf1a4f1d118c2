package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Images StartContainerd imports: both hold testcontainer (./testcontainer)
// at /testcontainer. They are made on the machine and never pulled; Pods
// must use them with imagePullPolicy Never.
const (
	// PauseImage is the runtime's sandbox image: testcontainer pause.
	PauseImage = "kubeboot.test/pause:1"
	// TestImage runs testcontainer with the container's arguments.
	TestImage = "kubeboot.test/testcontainer:1"
	// TestImageCommand is TestImage's entrypoint, for exec.
	TestImageCommand = "/testcontainer"
)

// cniPluginDirs are where distributions install the CNI plugins: Debian's
// containernetworking-plugins, and upstream's default.
var cniPluginDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// cniPlugins are the plugins the pod network's configuration uses, and
// the runtime's loopback.
var cniPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// StartContainerd runs containerd, with runc, until the test ends, on state
// of the test's own, and returns its CRI endpoint for the kubelet's
// --container-runtime-endpoint. Its CNI configuration is what the node
// writes in CNIConfDir (kubeboot's pod network); the plugins are the
// machine's.
//
// Call it inside the test's network and mount namespace (InNetNS), and
// RequireContainerd before entering it: it mounts tmpfs over
// /run/containerd, /run/netns and CNIConfDir, where containerd keeps its
// shims' sockets and the Pods' network namespaces and reads its network,
// so nothing of it outlives the namespace.
func StartContainerd(t testing.TB) string {
	t.Helper()
	plugins := RequireContainerd(t)
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
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	// restrict_oom_score_adj: the kubelet asks for oom_score_adj -998 for
	// a sandbox, which needs CAP_SYS_RESOURCE; these machines' root lacks
	// it, and runc fails. Restricted, the containers keep containerd's.
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, PauseImage, plugins, CNIConfDir)
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	var logs LockedBuffer
	cmd := exec.Command("containerd", "--config", configPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// The shims outlive containerd by design; the kubelet has gone
		// by now, so nothing would stop their containers.
		killShims(sock)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		// What the runtime mounted for Pods still there (their sandboxes'
		// shm) goes with it, so that the test's directory can be removed.
		unmountUnder(dir)
		if t.Failed() {
			t.Logf("containerd's log:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("containerd exited")
		default:
		}
		_, err := os.Stat(sock)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("containerd not serving: %v\n%s", err, logs.String())
	}

	bin := buildTestContainer(t)
	for ref, entrypoint := range map[string][]string{
		PauseImage: {TestImageCommand, "pause"},
		TestImage:  {TestImageCommand},
	} {
		image := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
		if err := writeImage(image, ref, bin, entrypoint); err != nil {
			t.Fatal(err)
		}
		// The CRI plugin's namespace, where the kubelet looks.
		if out, err := exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "images", "import", image).CombinedOutput(); err != nil {
			t.Fatalf("ctr images import %s: %v\n%s", ref, err, out)
		}
	}
	return "unix://" + sock
}

// RequireContainerd skips the test, or fails it when CI=true, unless
// containerd, ctr and runc are on PATH and the CNI bridge plugin is
// installed, with the others the pod network uses. It returns the
// plugins' directory.
func RequireContainerd(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found: %v", tool, err))
		}
	}
	for _, dir := range cniPluginDirs {
		if _, err := os.Stat(filepath.Join(dir, "bridge")); err != nil {
			continue
		}
		for _, plugin := range cniPlugins {
			if _, err := os.Stat(filepath.Join(dir, plugin)); err != nil {
				skipOrFail(t, fmt.Sprintf("no CNI %s plugin in %s", plugin, dir))
			}
		}
		return dir
	}
	skipOrFail(t, fmt.Sprintf("no CNI bridge plugin in %v", cniPluginDirs))
	return ""
}

// buildTestContainer builds ./testcontainer, static, into the test's
// temporary directory. It needs only the standard library, so it builds
// without the module proxy (inside a network namespace too).
func buildTestContainer(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
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

// writeImage writes an image archive as `docker save` does, which `ctr
// images import` reads: one layer holding bin as /testcontainer, tagged
// ref, with entrypoint.
func writeImage(path, ref, bin string, entrypoint []string) error {
	content, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(TestImageCommand, "/"), Mode: 0o755, Size: int64(len(content)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if _, err := lw.Write(content); err != nil {
		return err
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
// its PID namespace).
func killShims(sock string) {
	procs := Processes()
	for pid, p := range procs {
		if !strings.HasPrefix(p.Name, "containerd-shim") || !slices.Contains(p.Args, sock) {
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
