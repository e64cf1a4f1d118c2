package harness

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// NodeArgs are the --kubelet-arg and --proxy-arg flags of a node in a
// network and mount namespace of its own (InNetNS) whose kubelet runs Pods on the CRI
// runtime at cri (--container-runtime-endpoint), or on the embedded
// containerd when cri is "" (EmbeddedContainerd gives its flags). This
// host has cgroup v1, so the kubelet is told to accept it and to keep out
// of the host's cgroups.
func NodeArgs(t testing.TB, cri string) []string {
	t.Helper()
	// The Pods' log directories, in tmpfs of the test's own mount
	// namespace.
	for _, dir := range []string{"/var/log/pods", "/var/log/containers"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
			t.Fatalf("mount tmpfs on %s: %v", dir, err)
		}
	}
	// The pod network's CNI configuration (podnetwork.DefaultCNIConf),
	// where the node's runtime reads it.
	privateDir(t, CNIConfDir)
	// The addresses host-local hands the Pods out.
	privateDir(t, "/var/lib/cni")
	// The kubelet makes its root directory a shared mount of itself;
	// detached, the directory can be removed.
	kubeletDir := t.TempDir()
	t.Cleanup(func() { _ = syscall.Unmount(kubeletDir, syscall.MNT_DETACH) })
	var runtime []string
	if cri != "" {
		runtime = []string{"--container-runtime-endpoint=" + cri}
	}
	return append(runtime,
		"--kubelet-arg=--fail-cgroupv1=false",
		"--kubelet-arg=--cgroups-per-qos=false",
		"--kubelet-arg=--enforce-node-allocatable=",
		"--kubelet-arg=--fail-swap-on=false",
		"--kubelet-arg=--root-dir="+kubeletDir,
		// The node shares the machine's disk with the build and the other
		// tests: the default thresholds (15% free for images) would evict
		// the test's Pods whenever the disk is merely busy.
		"--kubelet-arg=--eviction-hard=nodefs.available<1%,imagefs.available<1%,memory.available<100Mi",
		// nf_conntrack_max is not the namespace's to set.
		"--proxy-arg=--conntrack-max-per-core=0",
	)
}

// NodeServerArgs are the flags of a `kubeboot server --node` serving on
// addr:6443 (a fixed port: the namespace is private, and the kubelet's
// kubeconfig must still point at the server after a restart), its
// kubelet on cri ("" for the embedded containerd) with addr as its node
// IP, then NodeArgs.
func NodeServerArgs(t testing.TB, addr, cri string) []string {
	t.Helper()
	return append([]string{"--bind-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16",
		"--node", "--node-ip=" + addr}, NodeArgs(t, cri)...)
}

// StartNodeServer starts a ready `kubeboot server --node` on its embedded
// containerd, at Addr(0) (NodeServerArgs, then extra), as the node
// benchmarks run it; the test is skipped where the address, runc or the
// CNI plugins are missing.
func StartNodeServer(t testing.TB, extra ...string) *APIServer {
	t.Helper()
	addr := Addr(0)
	RequireAddrs(t, addr)
	RequireContainerd(t)
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	args := append(NodeServerArgs(t, addr, ""), EmbeddedContainerd(t, NodeDir(dataDir))...)
	return StartReadyServer(t, 2*time.Minute, bin, dataDir, append(args, extra...)...)
}

// NodeDir is the node's directory of a `kubeboot server --node` whose
// data dir is dataDir.
func NodeDir(dataDir string) string { return filepath.Join(dataDir, "node") }

// CNIConfDir is where the nodes of the tests write their CNI
// configuration, kubeboot's default, made private to the test's mount
// namespace (NodeArgs, EmbeddedContainerd).
const CNIConfDir = "/etc/cni/net.d"

var (
	privateMu   sync.Mutex
	privateDirs = map[string]bool{}
)

// privateDir mounts tmpfs on dir, in the test's own mount namespace, for
// the rest of the test, unless it is mounted already: a runtime watching
// the directory must see what a node writes there later.
func privateDir(t testing.TB, dir string) {
	t.Helper()
	privateMu.Lock()
	defer privateMu.Unlock()
	if privateDirs[dir] {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	privateDirs[dir] = true
	t.Cleanup(func() {
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		privateMu.Lock()
		delete(privateDirs, dir)
		privateMu.Unlock()
	})
}
