package app

import (
	"context"
	"math"
	"runtime/debug"
	"testing"
	"time"
)

func TestBusyPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, busyGCPercent},                      // no collection yet
		{50 << 20, busyGCPercent},               // an apiserver's heap: all the headroom
		{256 << 20, busyGCPercent},              // 512 MiB of headroom is 200%
		{384 << 20, 133},                        // then the headroom stays 512 MiB
		{512 << 20, minBusyGCPercent},           // and the target the Go default
		{4 << 30, minBusyGCPercent},             // never below it
		{1<<63 - 1, minBusyGCPercent},           // nor overflowing
		{busyHeadroom, minBusyGCPercent},        // exactly at the floor
		{busyHeadroom / 2, busyGCPercent},       // exactly at the ceiling
		{busyHeadroom/2 + 1, busyGCPercent - 1}, // just past it
	} {
		if got := busyPercent(tc.live); got != tc.want {
			t.Errorf("busyPercent(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

func TestStartupLimit(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int64
	}{
		{0, startupMemoryLimit},                                       // before the first collection
		{30 << 20, startupMemoryLimit},                                // a fresh server's heap
		{startupMemoryLimit / startupLimitFactor, startupMemoryLimit}, // at the floor
		{200 << 20, startupLimitFactor * 200 << 20},                   // a large cluster's: twice what is live
		{1 << 63, math.MaxInt64 / 2},                                  // never overflowing
	} {
		if got := startupLimit(tc.live); got != tc.want {
			t.Errorf("startupLimit(%d MiB) = %d MiB, want %d MiB", tc.live>>20, got>>20, tc.want>>20)
		}
	}
}

// TestLimitStartupMemoryLifts: the limit holds while starting, never
// above --memory-limit, and is lifted to --memory-limit when the start is
// over.
func TestLimitStartupMemoryLifts(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name            string
		ceiling         int64
		starting, ready int64
	}{
		{"no --memory-limit", math.MaxInt64, startupMemoryLimit, math.MaxInt64},
		{"a machine's 75%", 18 << 30, startupMemoryLimit, 18 << 30},
		{"below the start-up limit", 100 << 20, 100 << 20, 100 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			started := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				limitStartupMemory(context.Background(), started, tc.ceiling)
			}()
			deadline := time.Now().Add(5 * time.Second)
			for debug.SetMemoryLimit(-1) != tc.starting {
				if time.Now().After(deadline) {
					t.Fatalf("memory limit %d while starting, want %d", debug.SetMemoryLimit(-1), tc.starting)
				}
				time.Sleep(time.Millisecond)
			}
			close(started)
			<-done
			if got := debug.SetMemoryLimit(-1); got != tc.ready {
				t.Errorf("memory limit %d once started, want %d", got, tc.ready)
			}
		})
	}
}

// TestAtDefaultTarget: under load, the start-up memory limit ends once
// the live heap is large enough that the busy target is Go's default (the
// limit would undercut it), and not before.
func TestAtDefaultTarget(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want bool
	}{
		{30 << 20, false},             // a fresh server: components still starting
		{busyHeadroom / 2, false},     // headroom still above the default
		{busyHeadroom - 8<<20, false}, // just below the floor (101%)
		{busyHeadroom, true},          // the busy target at Go's default
		{2 << 30, true},               // thousands of simulated nodes, never idle
	} {
		if got := atDefaultTarget(tc.live); got != tc.want {
			t.Errorf("atDefaultTarget(%d MiB) = %v, want %v", tc.live>>20, got, tc.want)
		}
	}
}
