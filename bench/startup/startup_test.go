//go:build linux

package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want summary
	}{
		{[]float64{7}, summary{Median: 7, Min: 7, P90: 7, Max: 7}},
		{[]float64{3, 1, 2}, summary{Median: 2, Min: 1, P90: 3, Max: 3}},
		{[]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, summary{Median: 5.5, Min: 1, P90: 9, Max: 10}},
	} {
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestLogTail(t *testing.T) {
	l := newLogTail()
	l.Write([]byte("I0101 starting\nkubeboot apiserver serving on https://127.0.0.1:1234\nadmin kube"))
	if got := <-l.url; got != "https://127.0.0.1:1234" {
		t.Errorf("url = %q", got)
	}
	for range 2 * tailLines {
		l.Write([]byte("config\n"))
	}
	l.Write([]byte("last"))
	if got, want := l.tail(), strings.Repeat("config\n", tailLines)+"last"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
}

func TestParseRuntimeMemory(t *testing.T) {
	metrics := strings.Join([]string{
		"# HELP go_gc_heap_live_bytes Heap memory occupied by live objects.",
		"# TYPE go_gc_heap_live_bytes gauge",
		"go_gc_heap_live_bytes 6.291456e+07", // 60 MiB
		"go_memory_classes_heap_stacks_bytes 1.8874368e+07",
		"go_memory_classes_heap_unused_bytes 9e+09", // not part of the floor
		"go_memory_classes_metadata_mcache_inuse_bytes 1048576",
		"go_memory_classes_metadata_mcache_free_bytes 9e+09",
		"go_memory_classes_metadata_mspan_inuse_bytes 1048576",
		"go_memory_classes_metadata_other_bytes 3145728",
		"go_memory_classes_profiling_buckets_bytes 1048576",
		`apiserver_request_total{code="200"} 12`,
	}, "\n")
	got, err := parseRuntimeMemory([]byte(metrics))
	if err != nil {
		t.Fatal(err)
	}
	if want := (runtimeMemory{HeapLive: 60, Stacks: 18, Metadata: 6}); got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if floor := got.floor(30); floor != 114 {
		t.Errorf("floor with 30 MiB of executable = %v MiB, want 114", floor)
	}

	if _, err := parseRuntimeMemory([]byte("go_gc_heap_live_bytes 1\n")); err == nil {
		t.Error("metrics without the stacks and metadata parsed without an error")
	}
}
