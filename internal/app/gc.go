package app

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/memtrim"
)

// The garbage collector's targets when GOGC is not set (the Go default is
// 100). Start-up allocates much and keeps little, on a deadline: until the
// server is ready the collector runs at startupGCPercent. A control plane
// mostly idles, so then a smaller heap is worth a little more GC work:
// idleGCPercent. Under load that setting gave the collector's workers and
// allocation ~30% of the CPU of 2,000 Service creates, so while the
// process allocates faster than busyAllocRate it runs at busyGCPercent:
// Service creates ran ~1.3x faster at 100 than at 50, and 1.15-1.2x faster
// again at 200, for a peak RSS ~10% higher (docs/performance.md). It goes
// back to idleGCPercent, with the heap returned to the OS, once the rate
// falls below idleAllocRate. An idle server allocates ~0.7 MB/s.
const (
	startupGCPercent = 400
	idleGCPercent    = 50
	busyGCPercent    = 200

	busyAllocRate = 16 << 20 // bytes/s
	idleAllocRate = 4 << 20
	gcLoadPeriod  = time.Second
)

// heapAllocs is the runtime metric of bytes allocated so far.
const heapAllocs = "/gc/heap/allocs:bytes"

// releaseStartupMemory runs once the server is ready and then follows the
// load, sampling the allocation rate every gcLoadPeriod until ctx is
// done. From ready, and whenever the process allocates faster than
// busyAllocRate, the collector runs at busyGCPercent. Whenever it
// allocates less than idleAllocRate it runs at idleGCPercent, with the
// heap returned to the OS; the first time, the executable pages only
// start-up needed are given back too. So start-up's memory is released
// once the server is idle, not under a load that starts as soon as it is
// ready. Unless tuneGC (GOGC is not set), the collector is left alone.
func releaseStartupMemory(ctx context.Context, ready <-chan struct{}, tuneGC bool) {
	select {
	case <-ready:
	case <-ctx.Done():
		return
	}
	logger := klog.FromContext(ctx)
	if tuneGC {
		debug.SetGCPercent(busyGCPercent)
	}
	sample := []metrics.Sample{{Name: heapAllocs}}
	metrics.Read(sample)
	last := sample[0].Value.Uint64()
	busy, trimmed := true, false
	ticker := time.NewTicker(gcLoadPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		metrics.Read(sample)
		now := sample[0].Value.Uint64()
		rate := float64(now-last) / gcLoadPeriod.Seconds()
		last = now
		switch {
		case !busy && rate > busyAllocRate:
			busy = true
			if tuneGC {
				debug.SetGCPercent(busyGCPercent)
			}
			logger.V(4).Info("Garbage collector target raised under load", "allocBytesPerSecond", int64(rate), "gcPercent", busyGCPercent)
		case busy && rate < idleAllocRate:
			busy = false
			if !trimmed {
				trimmed = true
				n, err := memtrim.ReleaseStartupPages()
				logger.V(2).Info("Released start-up pages of the executable", "bytes", n, "err", err)
			}
			if tuneGC {
				debug.SetGCPercent(idleGCPercent)
				debug.FreeOSMemory()
			}
			logger.V(4).Info("Garbage collector target lowered when idle", "allocBytesPerSecond", int64(rate), "gcPercent", idleGCPercent)
		}
	}
}
