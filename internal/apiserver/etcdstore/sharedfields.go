package etcdstore

import (
	"bytes"
	"context"
	"hash/maphash"
	goruntime "runtime"
	"sync"
	"unsafe"
	"weak"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

// The watch cache keeps every stored object decoded, and in its history
// the versions of the last minutes, so each is held with its
// managedFields: one entry per manager, each a serialized field set of
// hundreds of bytes. Most of those sets are equal from one object to the
// next (every Pod of a ReplicaSet as kube-controller-manager created it,
// every Lease as its kubelet renews it) and from one version of an object
// to the next (an update by one manager leaves the others' entries as
// they were). At 30,000 Pods they were 6% of the live heap. sharedFieldSets
// keeps one copy of each set the watch cache's objects hold.
//
// Sharing the bytes is safe because the watch cache's objects are
// read-only: whatever changes one (an update starting from the cached
// object, a watch event's caching wrapper) deep-copies it first, as it
// already must, since the store, the history and every watcher share the
// object itself.

// minSharedFieldSet is the smallest field set worth a table entry.
const minSharedFieldSet = 64

// fieldSets holds one copy of each field set in use, weakly: a set no
// cached object holds any more leaves the table.
type fieldSets struct {
	seed maphash.Seed
	mu   sync.Mutex
	held map[uint64]heldSet
}

// heldSet is a held field set: its first byte, weakly, and its length.
type heldSet struct {
	first weak.Pointer[byte]
	n     int
}

func newFieldSets() *fieldSets {
	return &fieldSets{seed: maphash.MakeSeed(), held: map[uint64]heldSet{}}
}

// share returns the held copy of raw's content, or raw, now held. Two
// contents with the same hash: the second is not shared.
func (f *fieldSets) share(raw []byte) []byte {
	if len(raw) < minSharedFieldSet {
		return raw
	}
	h := maphash.Bytes(f.seed, raw)
	f.mu.Lock()
	defer f.mu.Unlock()
	if held, ok := f.held[h]; ok {
		if first := held.first.Value(); first != nil {
			if c := unsafe.Slice(first, held.n); bytes.Equal(c, raw) {
				return c
			}
			return raw
		}
	}
	f.held[h] = heldSet{first: weak.Make(&raw[0]), n: len(raw)}
	goruntime.AddCleanup(&raw[0], f.forget, h)
	return raw
}

// forget drops h's entry if its set is gone.
func (f *fieldSets) forget(h uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[h].first.Value() == nil {
		delete(f.held, h)
	}
}

func (f *fieldSets) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held)
}

// shareObject makes obj's managedFields hold the shared copies of their
// field sets.
func (f *fieldSets) shareObject(obj runtime.Object) {
	if wrapped, ok := obj.(storage.WatchEventWithRecordTime); ok {
		obj = wrapped.Unwrap()
	}
	// Typed objects only: an unstructured one's field sets are maps, and
	// its GetManagedFields builds a copy.
	if _, ok := obj.(runtime.Unstructured); ok {
		return
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	for _, entry := range accessor.GetManagedFields() {
		if entry.FieldsV1 != nil {
			entry.FieldsV1.Raw = f.share(entry.FieldsV1.Raw)
		}
	}
}

// sharingFieldSets is the storage the watch cache fills itself from: its
// lists' and watch events' objects hold shared field sets.
type sharingFieldSets struct {
	storage.Interface
	sets *fieldSets
}

func (s sharingFieldSets) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	return meta.EachListItem(listObj, func(obj runtime.Object) error {
		s.sets.shareObject(obj)
		return nil
	})
}

func (s sharingFieldSets) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return sharedobjects.Watch(w, func(obj any) (any, error) {
		s.sets.shareObject(obj.(runtime.Object))
		return obj, nil
	}), nil
}
