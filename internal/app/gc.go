package app

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// The garbage collector's targets when GOGC is not set (the Go default is
// 100). Start-up allocates much and keeps little, on a deadline: until the
// server is ready the collector runs at startupGCPercent. A control plane
// mostly idles, so then a smaller heap is worth a little more GC work:
// idleGCPercent. Under load (2,000 Service creates) that setting gave the
// collector's workers and allocation ~30% of the CPU, and the same load
// ran ~1.3x faster at 100 (docs/performance.md), so while the process allocates
// faster than busyAllocRate it runs at busyGCPercent, and back at
// idleGCPercent, with the heap returned to the OS, once the rate falls
// below idleAllocRate. An idle server allocates ~0.7 MB/s.
const (
	startupGCPercent = 400
	idleGCPercent    = 50
	busyGCPercent    = 100

	busyAllocRate = 16 << 20 // bytes/s
	idleAllocRate = 4 << 20
	gcLoadPeriod  = time.Second
)

// heapAllocs is the runtime metric of bytes allocated so far.
const heapAllocs = "/gc/heap/allocs:bytes"

// gcByLoad switches the collector between idleGCPercent, which the caller
// has set, and busyGCPercent by the allocation rate, sampled every
// gcLoadPeriod, until ctx is done.
func gcByLoad(ctx context.Context) {
	logger := klog.FromContext(ctx)
	sample := []metrics.Sample{{Name: heapAllocs}}
	metrics.Read(sample)
	last := sample[0].Value.Uint64()
	busy := false
	wait.UntilWithContext(ctx, func(context.Context) {
		metrics.Read(sample)
		now := sample[0].Value.Uint64()
		rate := float64(now-last) / gcLoadPeriod.Seconds()
		last = now
		switch {
		case !busy && rate > busyAllocRate:
			busy = true
			debug.SetGCPercent(busyGCPercent)
			logger.V(4).Info("Garbage collector target raised under load", "allocBytesPerSecond", int64(rate), "gcPercent", busyGCPercent)
		case busy && rate < idleAllocRate:
			busy = false
			debug.SetGCPercent(idleGCPercent)
			debug.FreeOSMemory()
			logger.V(4).Info("Garbage collector target lowered when idle", "allocBytesPerSecond", int64(rate), "gcPercent", idleGCPercent)
		}
	}, gcLoadPeriod)
}
