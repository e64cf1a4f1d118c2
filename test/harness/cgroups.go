package harness

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// NodeCgroups gives the test's node name a cgroup root of its own,
// kubeboot-NAME in every cgroup hierarchy of the host, and returns the
// flags that make its kubelet keep its Pods there with cgroups per QoS
// class and node allocatable enforced, as on a host of its own. NodeArgs
// keeps the kubelet out of the host's cgroups instead
// (--cgroups-per-qos=false), where upstream's kubelet crashes resizing a
// Pod in place (its no-op pod cgroup manager reports no memory limit,
// which the resize dereferences); two nodes of one test need a root
// each, the host's cgroups being shared by its namespaces. Pass the flags
// after NodeArgs'. The roots are removed when the test ends: call it
// before the node's EmbeddedContainerd, whose cleanup kills the
// containers in them.
func NodeCgroups(t testing.TB, name string) []string {
	t.Helper()
	root := "kubeboot-" + name
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hierarchies {
		dir := filepath.Join(h, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("cgroup root of node %s: %v", name, err)
		}
		// A cpuset cgroup takes no task until it has CPUs and memory
		// nodes: its parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil && filepath.Base(h) == "cpuset" {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					t.Fatalf("cgroup root of node %s: %v", name, err)
				}
			}
		}
		t.Cleanup(func() { removeCgroup(dir) })
	}
	return []string{"--kubelet-arg=--cgroups-per-qos=true", "--kubelet-arg=--enforce-node-allocatable=pods",
		"--kubelet-arg=--cgroup-root=/" + root}
}

// cgroupHierarchies are the mount points of the host's cgroup
// hierarchies (v1's, one per controller set, or v2's one).
func cgroupHierarchies() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		// mountinfo: ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		if !slices.Contains(out, f[4]) {
			out = append(out, f[4])
		}
	}
	return out, nil
}

// removeCgroup removes the cgroup dir and those under it, deepest first.
// The containers killed just before may take a moment to leave theirs
// (a cgroup with a process cannot be removed): it tries for a few
// seconds.
func removeCgroup(dir string) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			_ = os.Remove(d)
		}
		if _, err := os.Stat(dir); os.IsNotExist(err) || time.Now().After(deadline) {
			return
		}
	}
}
