//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
)

// runtimeMemory is the Go runtime's own account of a process's memory
// (its /metrics), in MiB: what a resident set cannot do without while the
// process holds what it holds.
type runtimeMemory struct {
	// HeapLive is the heap the last collection found live; Stacks the
	// goroutine stacks; Metadata the runtime's structures (spans, GC
	// metadata, caches).
	HeapLive, Stacks, Metadata float64
}

// The runtime's metrics, as client_golang's Go collector exports them,
// and the field each adds to. The metadata counts what is in use, not
// what is reserved.
var runtimeMetrics = map[string]func(*runtimeMemory) *float64{
	"go_gc_heap_live_bytes":                         func(m *runtimeMemory) *float64 { return &m.HeapLive },
	"go_memory_classes_heap_stacks_bytes":           func(m *runtimeMemory) *float64 { return &m.Stacks },
	"go_memory_classes_metadata_mcache_inuse_bytes": func(m *runtimeMemory) *float64 { return &m.Metadata },
	"go_memory_classes_metadata_mspan_inuse_bytes":  func(m *runtimeMemory) *float64 { return &m.Metadata },
	"go_memory_classes_metadata_other_bytes":        func(m *runtimeMemory) *float64 { return &m.Metadata },
	"go_memory_classes_profiling_buckets_bytes":     func(m *runtimeMemory) *float64 { return &m.Metadata },
}

// readRuntimeMemory reads the apiserver's /metrics with config.
func readRuntimeMemory(ctx context.Context, config func() (*rest.Config, error)) (runtimeMemory, error) {
	c, err := config()
	if err != nil {
		return runtimeMemory{}, err
	}
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		return runtimeMemory{}, err
	}
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return runtimeMemory{}, fmt.Errorf("reading /metrics: %w", err)
	}
	return parseRuntimeMemory(body)
}

// parseRuntimeMemory reads the runtime's memory from metrics in
// Prometheus's text format.
func parseRuntimeMemory(body []byte) (runtimeMemory, error) {
	var m runtimeMemory
	seen := 0
	scanner := bufio.NewScanner(bytes.NewReader(body))
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		name, value, ok := strings.Cut(scanner.Text(), " ")
		field, known := runtimeMetrics[name]
		if !ok || !known {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return m, fmt.Errorf("/metrics: %s: %w", name, err)
		}
		*field(&m) += v / (1 << 20)
		seen++
	}
	if seen != len(runtimeMetrics) {
		return m, fmt.Errorf("/metrics has %d of the Go runtime's %d memory metrics read", seen, len(runtimeMetrics))
	}
	return m, scanner.Err()
}

// floor is the least the idle resident set could be with this heap, these
// goroutines and this working set of the executable: no collector
// headroom, no fragmentation.
func (m runtimeMemory) floor(file float64) float64 {
	return m.HeapLive + m.Stacks + m.Metadata + file
}

// initMemory measures what the executable holds once every package is
// initialized, before a command runs: it starts `bin server` with a
// --config that is a named pipe, reads the process's memory while it waits
// to open it, and then gives it a config that is not YAML, which it
// refuses before it starts anything.
func (b *bench) initMemory() (benchserver.Memory, error) {
	dir, err := os.MkdirTemp(b.tmpDir, "kubeboot-init-")
	if err != nil {
		return benchserver.Memory{}, err
	}
	defer os.RemoveAll(dir)
	pipe := filepath.Join(dir, "config.yaml")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		return benchserver.Memory{}, err
	}
	cmd := exec.Command(b.bin, "server", "--config", pipe, "--data-dir", dir)
	if err := cmd.Start(); err != nil {
		return benchserver.Memory{}, err
	}
	defer func() {
		// Opening the pipe for writing lets the reader's open return; it
		// fails at once (ENXIO) when the process is not opening it, which
		// is then killed.
		if w, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_, _ = w.WriteString("[not a map\n")
			w.Close()
		} else {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	for deadline := time.Now().Add(b.timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if openingFIFO(cmd.Process.Pid) {
			return benchserver.ReadMemory(cmd.Process.Pid)
		}
	}
	return benchserver.Memory{}, fmt.Errorf("%s server --config %s: did not open its config file within %s", b.bin, pipe, b.timeout)
}

// openingFIFO reports whether a thread of process pid waits in the
// kernel for a named pipe's other end (wait_for_partner, in open).
func openingFIFO(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		if wchan, err := os.ReadFile(t); err == nil && string(wchan) == "wait_for_partner" {
			return true
		}
	}
	return false
}
