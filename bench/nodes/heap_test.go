package nodes

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
)

// liveHeap is the server's live heap in bytes: what the collection it is
// made to run (through its debug socket) marked live, as its /metrics
// report it (go_gc_heap_live_bytes, the runtime's /gc/heap/live:bytes).
// The heap in use right after that collection (HeapAlloc) also counts
// what the process allocated while it ran: at 5,000 nodes, 5,266 MiB
// against 3,030 MiB live.
func (s server) liveHeap(tb testing.TB) uint64 {
	if _, err := debugGet(debugClient(s.socket), "/debug/pprof/heap?gc=1"); err != nil {
		tb.Fatalf("live heap: %v", err)
	}
	metrics, err := s.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("live heap: %v", err)
	}
	for line := range strings.Lines(string(metrics)) {
		if value, ok := strings.CutPrefix(line, "go_gc_heap_live_bytes "); ok {
			live, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				tb.Fatalf("live heap: %v", err)
			}
			return uint64(live)
		}
	}
	tb.Fatal("live heap: no go_gc_heap_live_bytes in /metrics")
	return 0
}

// heap measures the server's live heap against the Pods it stores, given
// its live heap before the Pods (before). With restart, it then restarts
// the server (which s no longer is) and measures it again once its nodes
// are Ready: the watch cache's history, which holds the versions of the
// last minute or more of the load (all of CI's sizes'), and what the
// components hold while busy are gone; what is left is what each stored
// Pod costs a server that runs on.
func (s server) heap(tb testing.TB, before uint64, restart bool) heapFigures {
	// A list of one Pod counts them all (remainingItemCount).
	list, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		tb.Fatalf("counting Pods: %v", err)
	}
	h := heapFigures{before: before, after: s.liveHeap(tb), pods: int64(len(list.Items))}
	if list.RemainingItemCount != nil {
		h.pods += *list.RemainingItemCount
	}
	if restart {
		restarted := s.restart(tb)
		defer benchserver.Stop(tb, restarted.APIServer, time.Minute)
		time.Sleep(settleAfterRestart)
		h.settled = restarted.liveHeap(tb)
	}
	return h
}

// settleAfterRestart is how long a restarted server is left before its
// heap is read: its informers have listed once its nodes are Ready, and
// this lets the first resyncs and scrapes pass.
const settleAfterRestart = 10 * time.Second

// heapFigures are a server's live heap before a load that left pods Pods
// stored, right after it, and after a restart (0 if not measured).
type heapFigures struct {
	before, after, settled uint64 // bytes
	pods                   int64
}

// perStoredPod is the live heap per stored Pod in KiB: all of it, as
// issue 66 counts it (its target is 24 KiB at 150,000 Pods, where the
// Pods are most of the heap).
func (h heapFigures) perStoredPod() float64 {
	return float64(h.after) / 1024 / float64(max(h.pods, 1))
}

// perAddedPod is the live heap the Pods added, per Pod, in KiB: without
// the nodes' and the server's own.
func (h heapFigures) perAddedPod() float64 {
	return (float64(h.after) - float64(h.before)) / 1024 / float64(max(h.pods, 1))
}

// perSettledPod is perAddedPod after the restart: what a server that
// runs on holds for each Pod.
func (h heapFigures) perSettledPod() float64 {
	return (float64(h.settled) - float64(h.before)) / 1024 / float64(max(h.pods, 1))
}

func (h heapFigures) log(tb testing.TB) {
	tb.Logf("kubeboot: live heap %d MiB before the load, %d MiB after with %d Pods stored: %.1f KiB a stored Pod, %.1f KiB each Pod added",
		h.before>>20, h.after>>20, h.pods, h.perStoredPod(), h.perAddedPod())
	if h.settled > 0 {
		tb.Logf("kubeboot: restarted, live heap %d MiB: %.1f KiB each Pod added", h.settled>>20, h.perSettledPod())
	}
}
