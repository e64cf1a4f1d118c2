// Package nodeport allocates Service NodePorts. The state is the bitmap
// RangeAllocation kube-apiserver keeps at /registry/ranges/servicenodeports,
// updated by compare-and-swap, so it is correct across apiservers and
// compatible with upstream both ways. Unlike upstream, which writes once per
// request and serializes every NodePort create on that one key, requests
// arriving together are committed together: one etcd write carries a batch
// (group commit), so throughput grows with concurrency instead of
// collapsing into CAS retries.
package nodeport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"

	"github.com/kubeboot/kubeboot/internal/apiserver/services/repair"
	"github.com/kubeboot/kubeboot/internal/platform/network"
)

// Key is the etcd key of the bitmap below the storage prefix, as
// kube-apiserver's.
const Key = "/ranges/servicenodeports"

// errUnchanged ends a compare-and-swap that would write nothing new.
var errUnchanged = errors.New("node port bitmap unchanged")

// maxBatch bounds the requests one write commits.
const maxBatch = 512

// Allocator hands out the ports of --service-node-port-range.
type Allocator struct {
	rng      network.PortRange
	reserved int // low offsets kept for Services that ask for a port
	store    storage.Interface
	ops      chan *op
	cancel   context.CancelFunc
	done     chan struct{}

	mu   sync.Mutex
	last *corev1.RangeAllocation // last state seen, a hint for the next CAS
}

// op is one request: allocate want (0 = any free port) and release free,
// all or nothing.
type op struct {
	ctx    context.Context
	want   []int
	free   []int
	mark   []int // set if clear (repair); never fails
	dryRun bool
	reply  chan result
}

type result struct {
	ports []int
	// errs holds one error per entry of want that failed.
	errs map[int]error
	// marked are the entries of mark that were clear and are now set.
	marked []int
	err    error
}

// New starts an allocator on store (a raw storage of RangeAllocation
// objects). Close stops it.
func New(rng network.PortRange, store storage.Interface) *Allocator {
	ctx, cancel := context.WithCancel(context.Background())
	a := &Allocator{
		rng:      rng,
		reserved: staticBand(rng.Size),
		store:    store,
		ops:      make(chan *op, maxBatch),
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	go a.run(ctx)
	return a
}

// staticBand is kube-apiserver's split of a node port range: the lowest
// min(max(16, size/32), 128) ports are left to Services that ask for them.
func staticBand(size int) int {
	if size <= 16 {
		return 0
	}
	return min(max(16, size/32), 128)
}

// Range is the range handed out.
func (a *Allocator) Range() network.PortRange { return a.rng }

// Close stops the allocator; pending requests fail.
func (a *Allocator) Close() {
	a.cancel()
	<-a.done
}

// Allocate reserves the ports in want, 0 meaning any free port, all or
// nothing, and returns them in order. On failure, errs maps the index of
// each refused entry of want to its error (portallocator.ErrAllocated,
// *portallocator.ErrNotInRange, portallocator.ErrFull) and err is nil; err reports storage
// failures. dryRun checks without reserving.
func (a *Allocator) Allocate(ctx context.Context, want []int, dryRun bool) (ports []int, errs map[int]error, err error) {
	r := a.submit(ctx, &op{want: want, dryRun: dryRun})
	return r.ports, r.errs, r.err
}

// Release frees ports. A port outside the range is ignored.
func (a *Allocator) Release(ctx context.Context, ports []int) error {
	return a.submit(ctx, &op{free: ports}).err
}

// Mark sets the given ports in the bitmap if they are clear, in the same
// compare-and-swap stream as allocations, and returns those it set: the
// repair loop uses it for ports Services hold that the bitmap lost.
// Setting a bit can at worst make a leak, which repair frees later.
func (a *Allocator) Mark(ctx context.Context, ports []int) ([]int, error) {
	r := a.submit(ctx, &op{mark: ports})
	return r.marked, r.err
}

// Snapshot returns the allocated ports as stored.
func (a *Allocator) Snapshot(ctx context.Context) ([]int, error) {
	ra := &corev1.RangeAllocation{}
	if err := a.store.Get(ctx, Key, storage.GetOptions{IgnoreNotFound: true}, ra); err != nil {
		return nil, err
	}
	bm := decodeBitmap(ra.Data, a.rng.Size)
	var out []int
	for off := 0; off < a.rng.Size; off++ {
		if bm.has(off) {
			out = append(out, a.rng.Base+off)
		}
	}
	return out, nil
}

func (a *Allocator) submit(ctx context.Context, o *op) result {
	o.ctx = ctx
	o.reply = make(chan result, 1)
	select {
	case a.ops <- o:
	case <-ctx.Done():
		return result{err: ctx.Err()}
	case <-a.done:
		return result{err: errors.New("node port allocator stopped")}
	}
	select {
	case r := <-o.reply:
		return r
	case <-ctx.Done():
		// The op may still commit; the repair loop frees what its owner
		// never stored.
		return result{err: ctx.Err()}
	case <-a.done:
		// Stopped with the op queued: nothing will answer it.
		return result{err: errors.New("node port allocator stopped")}
	}
}

// run commits batches until ctx ends.
func (a *Allocator) run(ctx context.Context) {
	defer close(a.done)
	for {
		var batch []*op
		select {
		case <-ctx.Done():
			a.failPending()
			return
		case o := <-a.ops:
			batch = append(batch, o)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case o := <-a.ops:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		a.commit(ctx, batch)
	}
}

func (a *Allocator) failPending() {
	for {
		select {
		case o := <-a.ops:
			o.reply <- result{err: errors.New("node port allocator stopped")}
		default:
			return
		}
	}
}

// commit applies a batch in one compare-and-swap write, retried on
// conflict with a fresh read.
func (a *Allocator) commit(ctx context.Context, batch []*op) {
	live := batch[:0]
	for _, o := range batch {
		if o.ctx.Err() != nil {
			o.reply <- result{err: o.ctx.Err()}
			continue
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	var results []result
	a.mu.Lock()
	hint := a.last
	a.mu.Unlock()
	var hintObj runtime.Object
	if hint != nil {
		hintObj = hint
	}
	out := &corev1.RangeAllocation{}
	err := a.store.GuaranteedUpdate(ctx, Key, out, true, nil, storage.SimpleUpdate(func(in runtime.Object) (runtime.Object, error) {
		cur := in.(*corev1.RangeAllocation)
		if cur.Range != "" && cur.Range != a.rng.String() {
			return nil, fmt.Errorf("stored node port range %q differs from --service-node-port-range %q; waiting for the repair loop", cur.Range, a.rng)
		}
		bm := decodeBitmap(cur.Data, a.rng.Size)
		before := bm.encode()
		results = make([]result, len(live))
		for i, o := range live {
			results[i] = a.apply(bm, o)
		}
		if bytes.Equal(bm.encode(), before) {
			// Dry runs, refusals, frees of free ports: nothing to write
			// (not even a first, empty bitmap).
			return nil, errUnchanged
		}
		next := cur.DeepCopy()
		next.Range = a.rng.String()
		next.Data = bm.encode()
		return next, nil
	}), hintObj)
	if errors.Is(err, errUnchanged) {
		err = nil
		out = nil
	}
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Committing node port allocations failed", "err", err, "requests", len(live))
		for _, o := range live {
			o.reply <- result{err: fmt.Errorf("allocating node ports: %w", err)}
		}
		return
	}
	if out != nil {
		a.mu.Lock()
		a.last = out
		a.mu.Unlock()
	}
	a.observe(out, live, results)
	for i, o := range live {
		o.reply <- results[i]
	}
}

// observe updates the metrics after a committed batch.
func (a *Allocator) observe(stored *corev1.RangeAllocation, ops []*op, results []result) {
	if stored != nil {
		n := decodeBitmap(stored.Data, a.rng.Size).count()
		repair.NodePortAllocated.Set(float64(n))
		repair.NodePortAvailable.Set(float64(a.rng.Size - n))
	}
	for i, o := range ops {
		if o.dryRun {
			continue
		}
		for j, p := range o.want {
			scope := "static"
			if p == 0 {
				scope = "dynamic"
			}
			if _, failed := results[i].errs[j]; failed || results[i].ports == nil {
				repair.NodePortAllocationErrors.WithLabelValues(scope).Inc()
			} else {
				repair.NodePortAllocations.WithLabelValues(scope).Inc()
			}
		}
	}
}

// apply runs one op against bm, changing bm only if the op succeeds in
// full and is not a dry run.
func (a *Allocator) apply(bm *bitmap, o *op) result {
	work := bm
	if len(o.want) > 0 {
		work = bm.clone()
	}
	for _, p := range o.free {
		if a.rng.Contains(p) {
			work.clear(p - a.rng.Base)
		}
	}
	var marked []int
	for _, p := range o.mark {
		if a.rng.Contains(p) && !work.has(p-a.rng.Base) {
			work.set(p - a.rng.Base)
			marked = append(marked, p)
		}
	}
	ports := make([]int, len(o.want))
	errs := map[int]error{}
	// Requested ports first, so a dynamic pick never takes one of them.
	for i, p := range o.want {
		if p == 0 {
			continue
		}
		switch {
		case !a.rng.Contains(p):
			errs[i] = &portallocator.ErrNotInRange{ValidPorts: a.rng.String()}
		case work.has(p - a.rng.Base):
			errs[i] = portallocator.ErrAllocated
		default:
			work.set(p - a.rng.Base)
			ports[i] = p
		}
	}
	for i, p := range o.want {
		if p != 0 {
			continue
		}
		off := work.free(a.reserved, a.rng.Size-1)
		if off < 0 {
			off = work.free(0, a.reserved-1)
		}
		if off < 0 {
			errs[i] = portallocator.ErrFull
			continue
		}
		work.set(off)
		ports[i] = a.rng.Base + off
	}
	if len(errs) > 0 {
		return result{errs: errs}
	}
	if !o.dryRun && work != bm {
		bm.bits.Set(work.bits)
	}
	return result{ports: ports, marked: marked}
}
