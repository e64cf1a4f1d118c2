package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on Linux
// whatever the kernel's tick.
const userHZ = 100

// ProcCPU returns the CPU time (user and system) process pid has used.
func ProcCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	_, rest, ok := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
