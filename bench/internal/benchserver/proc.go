package benchserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

// Memory is the resident memory of one or more processes, summed, in MiB.
type Memory struct {
	// RSS is the resident set (VmRSS) and Peak its high-water mark (VmHWM).
	RSS, Peak float64
	// Anon and File are the resident set's anonymous (heap, stacks) and
	// file-backed (the executable's pages) parts (RssAnon, RssFile).
	Anon, File float64
}

// ReadMemory returns the resident memory of the processes pids, summed,
// from /proc/PID/status.
func ReadMemory(pids ...int) (Memory, error) {
	var sum Memory
	for _, pid := range pids {
		status, err := harness.ProcStatus(pid)
		if err != nil {
			return Memory{}, fmt.Errorf("reading the memory of process %d: %w", pid, err)
		}
		for _, field := range []struct {
			name string
			sum  *float64
		}{{"VmRSS", &sum.RSS}, {"VmHWM", &sum.Peak}, {"RssAnon", &sum.Anon}, {"RssFile", &sum.File}} {
			kB, ok := status[field.name]
			if !ok {
				return Memory{}, fmt.Errorf("no %s in /proc/%d/status", field.name, pid)
			}
			*field.sum += float64(kB) / 1024
		}
	}
	return sum, nil
}

// MemoryOf is ReadMemory for a benchmark: it fails tb on error.
func MemoryOf(tb testing.TB, pids ...int) Memory {
	tb.Helper()
	m, err := ReadMemory(pids...)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// CPUOf returns the CPU time (user and system) the processes pids have
// used, summed; it fails tb on error.
func CPUOf(tb testing.TB, pids ...int) time.Duration {
	tb.Helper()
	var sum time.Duration
	for _, pid := range pids {
		d, err := harness.ProcCPU(pid)
		if err != nil {
			tb.Fatalf("reading the CPU time of process %d: %v", pid, err)
		}
		sum += d
	}
	return sum
}
