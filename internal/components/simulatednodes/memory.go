package simulatednodes

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// idleNodeMemory is what one simulated node with no Pods adds to the
// server's memory: its Node and Lease in the API server's watch caches,
// every informer's copy, kwok's state and etcd's. bench/nodes's
// BenchmarkIdle measured 502 MiB of RSS with 1,000 idle nodes, about 150
// of them the server's own (docs/performance.md); rounded up.
const idleNodeMemory = 512 << 10

// machineMemory returns the machine's memory in bytes (/proc/meminfo's
// MemTotal), 0 where it cannot tell.
var machineMemory = func() uint64 {
	data, err := os.ReadFile("/proc/meminfo")
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

// validateMemory refuses more simulated nodes than the machine's memory
// holds idle, before anything starts: a server that ran out of memory
// while thousands of nodes registered would leave them in etcd.
func (o *Options) validateMemory() error {
	total := machineMemory()
	if total == 0 || o.Count <= 0 || uint64(o.Count) <= total/idleNodeMemory {
		return nil
	}
	const gib = 1 << 30
	return fmt.Errorf("--simulated-nodes %d would take about %.1f GiB of memory with no Pods (%d KiB a node), more than this machine's %.1f GiB: at most %d",
		o.Count, float64(uint64(o.Count)*idleNodeMemory)/gib, idleNodeMemory>>10, float64(total)/gib, total/idleNodeMemory)
}
