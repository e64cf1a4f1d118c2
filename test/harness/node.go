package harness

import (
	"os"
	"syscall"
	"testing"
)

// NodeArgs are the --kubelet-arg and --proxy-arg flags of a node in a
// network and mount namespace of its own (InNetNS) whose kubelet runs Pods on the CRI
// runtime at cri. This host has cgroup v1, so the kubelet is told to
// accept it and to keep out of the host's cgroups.
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
	// The kubelet makes its root directory a shared mount of itself;
	// detached, the directory can be removed.
	kubeletDir := t.TempDir()
	t.Cleanup(func() { _ = syscall.Unmount(kubeletDir, syscall.MNT_DETACH) })
	return []string{
		"--kubelet-arg=--container-runtime-endpoint=" + cri,
		"--kubelet-arg=--fail-cgroupv1=false",
		"--kubelet-arg=--cgroups-per-qos=false",
		"--kubelet-arg=--enforce-node-allocatable=",
		"--kubelet-arg=--fail-swap-on=false",
		"--kubelet-arg=--root-dir=" + kubeletDir,
		// The node shares the machine's disk with the build and the other
		// tests: the default thresholds (15% free for images) would evict
		// the test's Pods whenever the disk is merely busy.
		"--kubelet-arg=--eviction-hard=nodefs.available<1%,imagefs.available<1%,memory.available<100Mi",
		// nf_conntrack_max is not the namespace's to set.
		"--proxy-arg=--conntrack-max-per-core=0",
	}
}
