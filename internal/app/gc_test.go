package app

import "testing"

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
