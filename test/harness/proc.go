package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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

// Process is a process of /proc.
type Process struct {
	// Name is the command's name (/proc/PID/comm, at most 15 bytes).
	Name string
	// Args are its arguments, the program first.
	Args   []string
	Parent int
}

// Processes returns the processes of /proc, by PID.
func Processes() map[int]Process {
	out := map[int]Process{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue // gone
		}
		// The name, field 2, is in parentheses and may hold spaces; the
		// parent is the second field after it.
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		rest := strings.Fields(string(stat[end+1:]))
		if len(rest) < 2 {
			continue
		}
		parent, _ := strconv.Atoi(rest[1])
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		out[pid] = Process{Name: string(stat[open+1 : end]),
			Args: strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"), Parent: parent}
	}
	return out
}
