package app

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubeboot/kubeboot/internal/platform/sysmem"
)

// memoryLimitFlag sets the Go runtime's soft memory limit of a server
// process. A server holds every stored object several times over (the
// watch cache, the informers), so its heap grows with the cluster; near
// the limit the collector runs more often, up to the runtime's cap of
// about half the CPU, instead of letting the heap double between
// collections. A large cluster or simulation then trades CPU for memory
// where it would otherwise be killed by the kernel.
const memoryLimitFlag = "memory-limit"

// defaultMemoryLimit leaves a quarter of the memory to what the runtime's
// limit does not count (the executable's pages, the kubelet, containerd
// and etcd's database file mapped in) and to the rest of the machine.
const defaultMemoryLimit = "75%"

// addMemoryFlags adds --memory-limit.
func addMemoryFlags(cmd *cobra.Command) {
	cmd.Flags().String(memoryLimitFlag, defaultMemoryLimit, "The Go runtime's soft memory limit for this process (GOMEMLIMIT): a size (10Gi, 9500Mi) "+
		"or a percentage of the memory the machine, or the process's cgroup, has. Near it the garbage collector runs more often, up to about half the CPU, "+
		"so that a large cluster trades CPU for staying within memory. 0 sets no limit. When the flag is not given and GOMEMLIMIT is set, GOMEMLIMIT's applies.")
}

// memoryLimit is the process's soft memory limit in bytes from
// --memory-limit (math.MaxInt64 for none), or the runtime's own from
// GOMEMLIMIT when that is set and the flag is not given; total is the
// memory a percentage is of.
func memoryLimit(fs *pflag.FlagSet, total uint64) (int64, error) {
	flag := fs.Lookup(memoryLimitFlag)
	if flag == nil {
		return math.MaxInt64, nil
	}
	if !flag.Changed && os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), nil
	}
	value := strings.TrimSpace(flag.Value.String())
	if pct, ok := strings.CutSuffix(value, "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p <= 0 || p > 100 {
			return 0, fmt.Errorf("--%s %q: a percentage must be above 0 and at most 100", memoryLimitFlag, value)
		}
		if total == 0 {
			return 0, fmt.Errorf("--%s %q: this machine's memory cannot be read (/proc/meminfo), so give a size such as 8Gi", memoryLimitFlag, value)
		}
		return int64(float64(total) * p / 100), nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: want a size such as 8Gi or a percentage such as 75%%: %w", memoryLimitFlag, value, err)
	}
	switch bytes := q.Value(); {
	case q.Sign() < 0:
		return 0, fmt.Errorf("--%s %q: a size must not be negative", memoryLimitFlag, value)
	case bytes == 0:
		return math.MaxInt64, nil
	case bytes < minMemoryLimit:
		return 0, fmt.Errorf("--%s %q: at least %dMi, or 0 for no limit: a server's own heap is ~70Mi idle", memoryLimitFlag, value, minMemoryLimit>>20)
	default:
		return bytes, nil
	}
}

// minMemoryLimit refuses a limit a server cannot start within: the
// collector would run back to back from the first request.
const minMemoryLimit = 256 << 20

// processMemoryLimit is memoryLimit for this machine.
func processMemoryLimit(fs *pflag.FlagSet) (int64, error) {
	return memoryLimit(fs, sysmem.Total())
}
