package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStatus returns the kB fields of /proc/PID/status (VmRSS, VmHWM,
// RssAnon, ...).
func ProcStatus(pid int) (map[string]int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(v, "kB") {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(v, "kB"))); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
