// Package sysmem tells how much memory this process may use: the
// machine's, or its control group's limit where that is lower (a server
// in a container or a systemd unit with MemoryMax). Sizes chosen from
// memory (how many simulated nodes fit, the Go runtime's soft limit)
// read it here, so that they agree.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Root is where the files read are found; tests point it elsewhere.
var Root = "/"

// Total returns the memory available to this process in bytes: the
// machine's MemTotal, or its cgroup's limit (v2 memory.max, v1
// memory.limit_in_bytes) where lower; 0 where it cannot tell.
func Total() uint64 {
	total := memTotal()
	if limit := cgroupLimit(); limit > 0 && (total == 0 || limit < total) {
		return limit
	}
	return total
}

// memTotal is /proc/meminfo's MemTotal in bytes, 0 where it cannot tell.
func memTotal() uint64 {
	data, err := os.ReadFile(filepath.Join(Root, "proc/meminfo"))
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		// MemTotal:       24596824 kB
		if f := bytes.Fields(s.Bytes()); len(f) == 3 && string(f[0]) == "MemTotal:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit is the memory limit of this process's cgroup in bytes, 0
// where there is none or it cannot tell. Only the process's own group is
// read, not its parents': the limits systemd and container runtimes set
// are on the group they start the process in.
func cgroupLimit() uint64 {
	data, err := os.ReadFile(filepath.Join(Root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		// v2: "0::/system.slice/kubeboot.service"; v1: "4:memory:/docker/abc".
		id, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		var file string
		switch {
		case id == "0" && controllers == "":
			file = filepath.Join(Root, "sys/fs/cgroup", path, "memory.max")
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			file = filepath.Join(Root, "sys/fs/cgroup/memory", path, "memory.limit_in_bytes")
		default:
			continue
		}
		if limit := readLimit(file); limit > 0 {
			return limit
		}
	}
	return 0
}

// readLimit reads a cgroup limit file: 0 for "max", a v1 group's
// "unlimited" (a value near the largest int64) or an unreadable file.
func readLimit(file string) uint64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n >= 1<<62 {
		return 0
	}
	return n
}
