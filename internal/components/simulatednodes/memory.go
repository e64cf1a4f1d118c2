package simulatednodes

import (
	"fmt"

	"github.com/kubeboot/kubeboot/internal/platform/sysmem"
)

// idleNodeMemory is what one simulated node with no Pods adds to the
// server's memory: its Node and Lease in the API server's watch caches,
// every informer's copy, kwok's state and etcd's. bench/nodes's
// BenchmarkIdle measured 502 MiB of RSS with 1,000 idle nodes, about 150
// of them the server's own (docs/performance.md); rounded up.
const idleNodeMemory = 512 << 10

// machineMemory is the memory the server may use (sysmem.Total); tests
// replace it.
var machineMemory = sysmem.Total

// validateMemory refuses more simulated nodes than the machine's memory
// holds idle, before anything starts: a server that ran out of memory
// while thousands of nodes registered would leave them in etcd.
func (o *Options) validateMemory() error {
	total := machineMemory()
	if total == 0 || o.Count <= 0 || uint64(o.Count) <= total/idleNodeMemory {
		return nil
	}
	const gib = 1 << 30
	return fmt.Errorf("--simulated-nodes %d would take about %.1f GiB of memory with no Pods (%d KiB a node), more than the %.1f GiB of memory this server has (the machine's, or its cgroup's limit): at most %d",
		o.Count, float64(uint64(o.Count)*idleNodeMemory)/gib, idleNodeMemory>>10, float64(total)/gib, total/idleNodeMemory)
}
