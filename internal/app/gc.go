package app

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/memtrim"
)

// The garbage collector's targets when GOGC is not set (the Go default is
// 100). Start-up allocates much and keeps little, on a deadline: until the
// server is ready the collector runs at startupGCPercent. A control plane
// mostly idles, so then a smaller heap is worth a little more GC work:
// idleGCPercent. Under load that setting gave the collector's workers and
// allocation ~30% of the CPU of 2,000 Service creates, so while the
// process allocates faster than busyAllocRate it runs at busyGCPercent:
// Service creates ran ~1.3x faster at 100 than at 50, and ~1.14x faster
// again at 200 (two alternating pairs that went different ways), for a
// peak RSS ~19% higher (docs/performance.md). It goes
// back to idleGCPercent, with the heap returned to the OS, once the rate
// falls below idleAllocRate. An idle server allocates ~0.7 MB/s.
//
// The headroom busyGCPercent gives is worth its memory while the heap is
// small; on a large one (the Pods of thousands of nodes, held by the watch
// cache and by every component's informers) it tripled the resident set.
// So under load the target is lowered as the live heap grows, to keep the
// headroom within busyHeadroom, down to minBusyGCPercent: the Go default,
// at which each of kube-apiserver's, kube-controller-manager's and
// kube-scheduler's processes runs.
const (
	startupGCPercent = 400
	idleGCPercent    = 50
	busyGCPercent    = 200
	minBusyGCPercent = 100
	busyHeadroom     = 512 << 20 // bytes

	busyAllocRate = 16 << 20 // bytes/s
	idleAllocRate = 4 << 20
	gcLoadPeriod  = time.Second
)

// While the server starts, startupGCPercent alone would let the heap
// grow to five times what is live between collections: most of the
// start's peak resident set. A memory limit caps it: startupMemoryLimit,
// or startupLimitFactor times the live heap once more is live (a start on
// a large cluster's data), so that the collector never runs back to back.
// Start-up took as long with it (docs/performance.md). The limit holds
// until the server first idles: the components that start once it is
// ready are part of the start. Once ready, it is lifted too when the live
// heap reaches busyHeadroom: the busy target is then Go's default, which
// a limit of twice the live heap (counting more than the heap) would
// undercut for a server that never idles, as one with thousands of
// simulated nodes: 10 collections a minute at 5,000 idle nodes instead of
// 7 (docs/performance.md).
const (
	startupMemoryLimit = 128 << 20 // bytes
	startupLimitFactor = 2
	startupLimitPeriod = 100 * time.Millisecond
)

// startupLimit is the memory limit while starting with live bytes of
// live heap.
func startupLimit(live uint64) int64 {
	const ceiling = math.MaxInt64 / 2
	if live >= ceiling/startupLimitFactor {
		return ceiling
	}
	return max(startupMemoryLimit, startupLimitFactor*int64(live))
}

// gcSettings is how a server process runs its collector.
type gcSettings struct {
	// tune is whether kubeboot sets the collector's targets: neither
	// GOGC nor GOMEMLIMIT is set.
	tune bool
	// limit is the process's soft memory limit (--memory-limit); the
	// start-up limit never exceeds it.
	limit int64
}

// limitStartupMemory sets the start-up memory limit, within ceiling, and
// follows the live heap with it until started is closed or ctx is done,
// then sets ceiling.
func limitStartupMemory(ctx context.Context, started <-chan struct{}, ceiling int64) {
	sample := []metrics.Sample{{Name: heapLive}}
	limit := min(startupLimit(0), ceiling)
	debug.SetMemoryLimit(limit)
	defer debug.SetMemoryLimit(ceiling)
	ticker := time.NewTicker(startupLimitPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-started:
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		metrics.Read(sample)
		if l := min(startupLimit(sample[0].Value.Uint64()), ceiling); l != limit {
			limit = l
			debug.SetMemoryLimit(limit)
		}
	}
}

// The runtime metrics read: bytes allocated so far, and the heap the last
// collection found live.
const (
	heapAllocs = "/gc/heap/allocs:bytes"
	heapLive   = "/gc/heap/live:bytes"
)

// atDefaultTarget reports whether live bytes of live heap are so many
// that the busy target is Go's default: under load, the start-up memory
// limit then ends (limitStartupMemory).
func atDefaultTarget(live uint64) bool {
	return busyPercent(live) == minBusyGCPercent
}

// busyPercent is the collector's target under load with live bytes of
// live heap.
func busyPercent(live uint64) int {
	if live == 0 {
		return busyGCPercent
	}
	return int(min(max(busyHeadroom*100/live, minBusyGCPercent), busyGCPercent))
}

// releaseStartupMemory runs once the server is ready and then follows the
// load, sampling the allocation rate every gcLoadPeriod until ctx is
// done. From ready, and whenever the process allocates faster than
// busyAllocRate, the collector runs at busyPercent of the live heap. Whenever it
// allocates less than idleAllocRate it runs at idleGCPercent, with the
// heap returned to the OS; the first time, the executable pages only
// start-up needed are given back too. So start-up's memory is released
// once the server is idle, not under a load that starts as soon as it is
// ready. Until it first idles, or its live heap needs no more than Go's
// default target (atDefaultTarget), the start-up memory limit holds
// (limitStartupMemory); then the limit is gc.limit. Unless gc.tune
// (neither GOGC nor GOMEMLIMIT is set), only gc.limit is set.
func releaseStartupMemory(ctx context.Context, ready <-chan struct{}, gc gcSettings) {
	started := make(chan struct{})
	if gc.tune {
		go limitStartupMemory(ctx, started, gc.limit)
	} else {
		debug.SetMemoryLimit(gc.limit)
	}
	select {
	case <-ready:
	case <-ctx.Done():
		return
	}
	logger := klog.FromContext(ctx)
	sample := []metrics.Sample{{Name: heapAllocs}, {Name: heapLive}}
	metrics.Read(sample)
	last := sample[0].Value.Uint64()
	percent := busyPercent(sample[1].Value.Uint64())
	if gc.tune {
		debug.SetGCPercent(percent)
	}
	// liftLimit ends the start-up memory limit (limitStartupMemory).
	liftLimit := sync.OnceFunc(func() { close(started) })
	if atDefaultTarget(sample[1].Value.Uint64()) {
		liftLimit()
	}
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
		case busy && rate >= idleAllocRate:
			if atDefaultTarget(sample[1].Value.Uint64()) {
				liftLimit()
			}
			if p := busyPercent(sample[1].Value.Uint64()); p != percent {
				percent = p
				if gc.tune {
					debug.SetGCPercent(percent)
				}
				logger.V(4).Info("Garbage collector target follows the live heap", "liveBytes", sample[1].Value.Uint64(), "gcPercent", percent)
			}
		case !busy && rate > busyAllocRate:
			busy = true
			percent = busyPercent(sample[1].Value.Uint64())
			if gc.tune {
				debug.SetGCPercent(percent)
			}
			logger.V(4).Info("Garbage collector target raised under load", "allocBytesPerSecond", int64(rate), "gcPercent", percent)
		case busy && rate < idleAllocRate:
			busy = false
			if !trimmed {
				trimmed = true
				liftLimit()
				n, err := memtrim.ReleaseStartupPages()
				logger.V(2).Info("Released start-up pages of the executable", "bytes", n, "err", err)
			}
			if gc.tune {
				debug.SetGCPercent(idleGCPercent)
				debug.FreeOSMemory()
			}
			logger.V(4).Info("Garbage collector target lowered when idle", "allocBytesPerSecond", int64(rate), "gcPercent", idleGCPercent)
		}
	}
}
