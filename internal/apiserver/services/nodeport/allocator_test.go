package nodeport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubeboot/kubeboot/internal/platform/network"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
)

func portRange(t testing.TB, s string) network.PortRange {
	t.Helper()
	pr, err := network.ParsePortRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// newAllocator starts an allocator for rng on a fresh key prefix and
// returns it with its storage (for a second allocator, or to inspect).
func newAllocator(t testing.TB, rng string) (*Allocator, storage.Interface, string) {
	t.Helper()
	prefix := newPrefix()
	store := newRawStore(t, prefix)
	a := New(portRange(t, rng), store)
	t.Cleanup(a.Close)
	return a, store, prefix
}

// stored reads the RangeAllocation as stored; nil if there is none.
func stored(t testing.TB, store storage.Interface) *corev1.RangeAllocation {
	t.Helper()
	ra := &corev1.RangeAllocation{}
	if err := store.Get(context.Background(), Key, storage.GetOptions{IgnoreNotFound: true}, ra); err != nil {
		t.Fatalf("reading the bitmap: %v", err)
	}
	if ra.ResourceVersion == "" {
		return nil
	}
	return ra
}

// storedPorts decodes the stored bitmap the way kube-apiserver does (a
// big-endian big.Int, bit i for port base+i), without the code under test.
func storedPorts(t testing.TB, store storage.Interface, base int) []int {
	t.Helper()
	ra := stored(t, store)
	if ra == nil {
		return nil
	}
	bits := new(big.Int).SetBytes(ra.Data)
	var out []int
	for i := 0; i < bits.BitLen(); i++ {
		if bits.Bit(i) == 1 {
			out = append(out, base+i)
		}
	}
	return out
}

// errKind names an allocation error for comparisons.
func errKind(err error) string {
	var notInRange *portallocator.ErrNotInRange
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, portallocator.ErrAllocated):
		return "allocated"
	case errors.Is(err, portallocator.ErrFull):
		return "full"
	case errors.As(err, &notInRange):
		return "notInRange"
	}
	return "other: " + err.Error()
}

func kinds(errs map[int]error) map[int]string {
	out := map[int]string{}
	for i, err := range errs {
		out[i] = errKind(err)
	}
	return out
}

func sameKinds(got map[int]error, want map[int]string) bool {
	g := kinds(got)
	if len(g) != len(want) {
		return false
	}
	for i, k := range want {
		if g[i] != k {
			return false
		}
	}
	return true
}

func TestAllocateRequestedPorts(t *testing.T) {
	ctx := context.Background()
	a, store, _ := newAllocator(t, "30000-32767")
	steps := []struct {
		name      string
		want      []int
		dryRun    bool
		wantErrs  map[int]string
		wantPorts []int
	}{
		{name: "free port", want: []int{30080}, wantPorts: []int{30080}},
		{name: "first port", want: []int{30000}, wantPorts: []int{30000}},
		{name: "last port", want: []int{32767}, wantPorts: []int{32767}},
		{name: "taken port", want: []int{30080}, wantErrs: map[int]string{0: "allocated"}},
		{name: "taken port, dry run", want: []int{30080}, dryRun: true, wantErrs: map[int]string{0: "allocated"}},
		{name: "below the range", want: []int{29999}, wantErrs: map[int]string{0: "notInRange"}},
		{name: "above the range", want: []int{32768}, wantErrs: map[int]string{0: "notInRange"}},
		{name: "well-known port", want: []int{80}, wantErrs: map[int]string{0: "notInRange"}},
		{name: "the same port twice in one call", want: []int{30090, 30090}, wantErrs: map[int]string{1: "allocated"}},
		{name: "several free ports", want: []int{31000, 31001, 30001}, wantPorts: []int{31000, 31001, 30001}},
	}
	var held []int
	for _, s := range steps {
		ports, errs, err := a.Allocate(ctx, s.want, s.dryRun)
		if err != nil {
			t.Fatalf("%s: Allocate(%v): %v", s.name, s.want, err)
		}
		if !sameKinds(errs, s.wantErrs) {
			t.Errorf("%s: Allocate(%v) refused %v, want %v", s.name, s.want, kinds(errs), s.wantErrs)
		}
		if len(s.wantErrs) == 0 && !slices.Equal(ports, s.wantPorts) {
			t.Errorf("%s: Allocate(%v) = %v, want %v", s.name, s.want, ports, s.wantPorts)
		}
		if len(s.wantErrs) > 0 && ports != nil {
			t.Errorf("%s: a refused Allocate returned ports %v", s.name, ports)
		}
		if len(s.wantErrs) == 0 && !s.dryRun {
			held = append(held, s.wantPorts...)
		}
		slices.Sort(held)
		if got := storedPorts(t, store, 30000); !slices.Equal(got, held) {
			t.Errorf("%s: stored ports %v, want %v", s.name, got, held)
		}
	}

	// The texts users see, as kube-apiserver's.
	_, errs, _ := a.Allocate(ctx, []int{80, 30080}, false)
	if got, want := errs[0].Error(), "provided port is not in the valid range. The range of valid ports is 30000-32767"; got != want {
		t.Errorf("out of range: %q, want %q", got, want)
	}
	if got, want := errs[1].Error(), "provided port is already allocated"; got != want {
		t.Errorf("taken: %q, want %q", got, want)
	}
}

// A call is all or nothing: when one of its ports is refused, none of the
// others is taken.
func TestAllocateAllOrNothing(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		want     []int
		wantErrs map[int]string
	}{
		{name: "free then taken", want: []int{30101, 30100}, wantErrs: map[int]string{1: "allocated"}},
		{name: "taken then free", want: []int{30100, 30101}, wantErrs: map[int]string{0: "allocated"}},
		{name: "dynamic and taken", want: []int{0, 30100}, wantErrs: map[int]string{1: "allocated"}},
		{name: "dynamic and out of range", want: []int{0, 0, 80}, wantErrs: map[int]string{2: "notInRange"}},
		{name: "several refusals", want: []int{80, 30100, 30102, 40000}, wantErrs: map[int]string{0: "notInRange", 1: "allocated", 3: "notInRange"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, store, _ := newAllocator(t, "30000-32767")
			if _, errs, err := a.Allocate(ctx, []int{30100}, false); err != nil || len(errs) > 0 {
				t.Fatal(err, errs)
			}
			before := stored(t, store)
			ports, errs, err := a.Allocate(ctx, tt.want, false)
			if err != nil {
				t.Fatal(err)
			}
			if !sameKinds(errs, tt.wantErrs) {
				t.Errorf("refused %v, want %v", kinds(errs), tt.wantErrs)
			}
			if ports != nil {
				t.Errorf("returned ports %v", ports)
			}
			if got := storedPorts(t, store, 30000); !slices.Equal(got, []int{30100}) {
				t.Errorf("stored ports %v, want only [30100]", got)
			}
			if after := stored(t, store); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("a refused call wrote the bitmap (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

func TestAllocateDynamicPrefersUpperPartThenFull(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		rng         string
		upper       []int // ports dynamic allocation takes first
		static      int   // size of the static band
		perCall     int   // dynamic ports asked for per call
		preallocate []int
	}{
		// 20 ports: 30000-30015 for requests, 30016-30019 handed out first.
		{name: "20 ports, one per call", rng: "30000-30019", upper: []int{30016, 30017, 30018, 30019}, static: 16, perCall: 1},
		{name: "20 ports, five per call", rng: "30000-30019", upper: []int{30016, 30017, 30018, 30019}, static: 16, perCall: 5},
		{name: "20 ports, requested ports in both parts", rng: "30000-30019", upper: []int{30016, 30017, 30018, 30019}, static: 16, perCall: 2, preallocate: []int{30000, 30015, 30017}},
		// 16 ports or fewer are not split.
		{name: "10 ports", rng: "30000-30009", upper: []int{30000, 30001, 30002, 30003, 30004, 30005, 30006, 30007, 30008, 30009}, static: 0, perCall: 3},
		{name: "low+size syntax", rng: "40000+19", upper: []int{40016, 40017, 40018, 40019}, static: 16, perCall: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, store, _ := newAllocator(t, tt.rng)
			pr := a.Range()
			if got := staticBand(pr.Size); got != tt.static {
				t.Fatalf("static band %d, want %d", got, tt.static)
			}
			held := map[int]bool{}
			if len(tt.preallocate) > 0 {
				if _, errs, err := a.Allocate(ctx, tt.preallocate, false); err != nil || len(errs) > 0 {
					t.Fatal(err, errs)
				}
				for _, p := range tt.preallocate {
					held[p] = true
				}
			}
			upper := map[int]bool{}
			for _, p := range tt.upper {
				upper[p] = true
			}
			freeUpper := 0
			for p := range upper {
				if !held[p] {
					freeUpper++
				}
			}
			free := pr.Size - len(held)
			n := 0
			for n < free {
				k := min(tt.perCall, free-n)
				ports, errs, err := a.Allocate(ctx, make([]int, k), false)
				if err != nil || len(errs) > 0 {
					t.Fatalf("Allocate(%d dynamic) after %d: %v %v", k, n, err, kinds(errs))
				}
				for _, p := range ports {
					if !pr.Contains(p) || held[p] {
						t.Fatalf("Allocate returned %d: out of range or already held", p)
					}
					if n < freeUpper && !upper[p] {
						t.Errorf("dynamic pick #%d = %d, in the static band while the upper part has free ports", n, p)
					}
					held[p] = true
					n++
				}
			}
			// Full: a dynamic request fails with ErrFull, a requested one
			// with ErrPortAllocated, and nothing changes.
			before := stored(t, store).ResourceVersion
			_, errs, err := a.Allocate(ctx, []int{0}, false)
			if err != nil || !sameKinds(errs, map[int]string{0: "full"}) {
				t.Errorf("Allocate on a full range: %v %v, want ErrFull", err, kinds(errs))
			} else if errs[0].Error() != "range is full" {
				t.Errorf("text %q, want upstream's", errs[0])
			}
			_, errs, _ = a.Allocate(ctx, []int{0}, true)
			if !sameKinds(errs, map[int]string{0: "full"}) {
				t.Errorf("dry-run Allocate on a full range: %v, want ErrFull", kinds(errs))
			}
			_, errs, _ = a.Allocate(ctx, []int{pr.Base}, false)
			if !sameKinds(errs, map[int]string{0: "allocated"}) {
				t.Errorf("Allocate(%d) on a full range: %v, want ErrPortAllocated", pr.Base, kinds(errs))
			}
			if after := stored(t, store).ResourceVersion; after != before {
				t.Errorf("refused calls wrote the bitmap")
			}
			if got := storedPorts(t, store, pr.Base); len(got) != pr.Size {
				t.Errorf("%d ports stored, want all %d", len(got), pr.Size)
			}
			// Releasing one port makes exactly that one available.
			if err := a.Release(ctx, []int{pr.Base + 3}); err != nil {
				t.Fatal(err)
			}
			ports, errs, err := a.Allocate(ctx, []int{0}, false)
			if err != nil || len(errs) > 0 || !slices.Equal(ports, []int{pr.Base + 3}) {
				t.Errorf("Allocate after releasing %d = %v %v %v", pr.Base+3, ports, kinds(errs), err)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	ctx := context.Background()
	a, store, _ := newAllocator(t, "30000-32767")
	if _, errs, err := a.Allocate(ctx, []int{30001, 30002, 30003}, false); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	steps := []struct {
		name    string
		release []int
		want    []int
	}{
		{name: "one port", release: []int{30002}, want: []int{30001, 30003}},
		{name: "a free port", release: []int{30002}, want: []int{30001, 30003}},
		{name: "out of range ports are ignored", release: []int{80, 29999, 32768}, want: []int{30001, 30003}},
		{name: "mixed", release: []int{80, 30003, 31000}, want: []int{30001}},
		{name: "nothing", release: nil, want: []int{30001}},
		{name: "the last one", release: []int{30001}, want: nil},
	}
	for _, s := range steps {
		if err := a.Release(ctx, s.release); err != nil {
			t.Fatalf("%s: Release(%v): %v", s.name, s.release, err)
		}
		if got := storedPorts(t, store, 30000); !slices.Equal(got, s.want) {
			t.Errorf("%s: stored %v, want %v", s.name, got, s.want)
		}
		if got, err := a.Snapshot(ctx); err != nil || !slices.Equal(got, s.want) {
			t.Errorf("%s: Snapshot() = %v, %v; want %v", s.name, got, err, s.want)
		}
	}
	// Released ports can be requested again.
	if ports, errs, err := a.Allocate(ctx, []int{30002, 30003}, false); err != nil || len(errs) > 0 || !slices.Equal(ports, []int{30002, 30003}) {
		t.Errorf("Allocate of released ports = %v %v %v", ports, kinds(errs), err)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	a, store, _ := newAllocator(t, "30000-30019")
	// Nothing stored yet: a dry run writes nothing either.
	if _, errs, err := a.Allocate(ctx, []int{30001, 0}, true); err != nil || len(errs) > 0 {
		t.Fatalf("dry run on an empty store: %v %v", err, kinds(errs))
	}
	if s := stored(t, store); s != nil {
		t.Errorf("a dry run stored a bitmap: %+v", s)
	}
	if _, errs, err := a.Allocate(ctx, []int{30016, 30017, 30018}, false); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	before := stored(t, store)
	for i := 0; i < 5; i++ {
		ports, errs, err := a.Allocate(ctx, []int{30005, 0, 0}, true)
		if err != nil || len(errs) > 0 {
			t.Fatalf("dry run: %v %v", err, kinds(errs))
		}
		if ports[0] != 30005 || ports[1] != 30019 || !(ports[2] >= 30000 && ports[2] <= 30015) || ports[2] == 30005 {
			t.Errorf("dry run = %v, want [30005 30019 <a free static-band port>]", ports)
		}
	}
	after := stored(t, store)
	if after.ResourceVersion != before.ResourceVersion || !bytes.Equal(after.Data, before.Data) {
		t.Errorf("dry runs wrote the bitmap: %x -> %x", before.Data, after.Data)
	}
	// What the dry run promised is really free.
	if _, errs, err := a.Allocate(ctx, []int{30005, 30019}, false); err != nil || len(errs) > 0 {
		t.Errorf("Allocate after the dry runs: %v %v", err, kinds(errs))
	}
}

// The bitmap is where and as kube-apiserver keeps it: the key
// <prefix>/ranges/servicenodeports, a v1 RangeAllocation in protobuf, with
// range "30000-32767" and data a big-endian big.Int whose bit i is port
// 30000+i. Each side reads the other's.
func TestStoredFormatIsKubeAPIServers(t *testing.T) {
	ctx := context.Background()
	a, store, prefix := newAllocator(t, "30000-32767")
	if s := stored(t, store); s != nil {
		t.Fatalf("a bitmap exists before any allocation: %+v", s)
	}
	if _, errs, err := a.Allocate(ctx, []int{30000, 30003, 30009, 32767}, false); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	ra := stored(t, store)
	if ra.Range != "30000-32767" {
		t.Errorf("range = %q, want %q", ra.Range, "30000-32767")
	}
	if want := upstreamBytes(0, 3, 9, 2767); !bytes.Equal(ra.Data, want) {
		t.Errorf("data = %x, want %x", ra.Data, want)
	}
	if got, err := a.Snapshot(ctx); err != nil || !slices.Equal(got, []int{30000, 30003, 30009, 32767}) {
		t.Errorf("Snapshot() = %v, %v", got, err)
	}

	resp, err := etcdClient.Get(ctx, prefix+"/ranges/servicenodeports")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd key %s/ranges/servicenodeports: %v %v", prefix, resp, err)
	}
	value := resp.Kvs[0].Value
	if !bytes.HasPrefix(value, []byte("k8s\x00")) {
		t.Errorf("stored value is not Kubernetes protobuf: %q", value[:min(len(value), 16)])
	}
	obj, gvk, err := legacyscheme.Codecs.UniversalDeserializer().Decode(value, nil, nil)
	if err != nil {
		t.Fatalf("decoding the stored value: %v", err)
	}
	if gvk.GroupVersion().String() != "v1" || gvk.Kind != "RangeAllocation" {
		t.Errorf("stored as %s, want v1 RangeAllocation", gvk)
	}
	if got := obj.(*corev1.RangeAllocation); got.Range != "30000-32767" || !bytes.Equal(got.Data, ra.Data) {
		t.Errorf("stored object %+v", got)
	}

	// A bitmap written by kube-apiserver (other ports) is honoured.
	_, store2, _ := newAllocator(t, "30000-32767")
	upstream := &corev1.RangeAllocation{Range: "30000-32767", Data: upstreamBytes(5, 100)}
	if err := store2.Create(ctx, Key, upstream, &corev1.RangeAllocation{}, 0); err != nil {
		t.Fatal(err)
	}
	b := New(portRange(t, "30000-32767"), store2)
	defer b.Close()
	if got, err := b.Snapshot(ctx); err != nil || !slices.Equal(got, []int{30005, 30100}) {
		t.Errorf("Snapshot of kube-apiserver's bitmap = %v, %v", got, err)
	}
	_, errs, err := b.Allocate(ctx, []int{30005, 30100}, false)
	if err != nil || !sameKinds(errs, map[int]string{0: "allocated", 1: "allocated"}) {
		t.Errorf("ports kube-apiserver allocated: %v %v, want both refused", kinds(errs), err)
	}
	if _, errs, err := b.Allocate(ctx, []int{30006}, false); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if got := stored(t, store2); !bytes.Equal(got.Data, upstreamBytes(5, 6, 100)) || got.Range != "30000-32767" {
		t.Errorf("after allocating 30006: %+v", got)
	}
}

// A bitmap of another range (the flag changed, or another apiserver runs
// with a different one) is not overwritten: allocation fails with an error
// naming both ranges until the repair loop migrates it.
func TestStoredRangeMismatch(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix()
	store := newRawStore(t, prefix)
	other := &corev1.RangeAllocation{Range: "30000-30099", Data: upstreamBytes(1, 2)}
	if err := store.Create(ctx, Key, other, &corev1.RangeAllocation{}, 0); err != nil {
		t.Fatal(err)
	}
	before := stored(t, store)
	a := New(portRange(t, "30000-32767"), store)
	defer a.Close()
	for _, want := range [][]int{{0}, {30050}, {31000}} {
		ports, errs, err := a.Allocate(ctx, want, false)
		if err == nil {
			t.Errorf("Allocate(%v) with a bitmap of another range = %v %v, want an error", want, ports, kinds(errs))
			continue
		}
		if !strings.Contains(err.Error(), "30000-30099") || !strings.Contains(err.Error(), "30000-32767") {
			t.Errorf("error %q does not name both ranges", err)
		}
	}
	if err := a.Release(ctx, []int{30001}); err == nil {
		t.Errorf("Release with a bitmap of another range succeeded")
	}
	after := stored(t, store)
	if after.ResourceVersion != before.ResourceVersion || after.Range != "30000-30099" {
		t.Errorf("the other range's bitmap was changed: %+v", after)
	}
}

// 64 goroutines on one allocator and 32 on a second one sharing the key
// (another apiserver): no port is handed out twice, including requested
// ports several callers race for, and everything handed out is stored.
func TestConcurrentAllocationAcrossApiservers(t *testing.T) {
	ctx := context.Background()
	a, store, prefix := newAllocator(t, "30000-32767")
	b := New(a.Range(), newRawStore(t, prefix))
	defer b.Close()
	band := staticBand(a.Range().Size)

	var mu sync.Mutex
	owner := map[int]string{}
	var wg sync.WaitGroup
	run := func(al *Allocator, name string, g int) {
		defer wg.Done()
		for i := 0; i < 5; i++ {
			var want []int
			switch i % 3 {
			case 0:
				want = []int{0}
			case 1:
				want = []int{0, 0}
			case 2:
				// Everyone races for the same few requested ports.
				want = []int{30000 + (g+i)%8}
			}
			who := fmt.Sprintf("%s-%d-%d", name, g, i)
			ports, errs, err := al.Allocate(ctx, want, false)
			if err != nil {
				t.Errorf("%s: %v", who, err)
				continue
			}
			if len(errs) > 0 {
				if want[0] == 0 || !sameKinds(errs, map[int]string{0: "allocated"}) {
					t.Errorf("%s: Allocate(%v) refused %v", who, want, kinds(errs))
				}
				continue
			}
			mu.Lock()
			for j, p := range ports {
				if prev, dup := owner[p]; dup {
					t.Errorf("port %d handed out twice: %s and %s", p, prev, who)
				}
				owner[p] = who
				if want[j] == 0 && p < 30000+band {
					t.Errorf("%s: dynamic port %d is in the static band", who, p)
				}
			}
			mu.Unlock()
		}
	}
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go run(a, "a", g)
	}
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go run(b, "b", g)
	}
	wg.Wait()

	var handedOut []int
	for p := range owner {
		handedOut = append(handedOut, p)
	}
	slices.Sort(handedOut)
	if got := storedPorts(t, store, 30000); !slices.Equal(got, handedOut) {
		t.Errorf("stored %d ports, handed out %d\nstored:     %v\nhanded out: %v", len(got), len(handedOut), got, handedOut)
	}
	// 96 goroutines each got 1+2+1+2 dynamic ports, and each of the 8
	// contested requested ports went to exactly one of them.
	if want := 96*(1+2+1+2) + 8; len(handedOut) != want {
		t.Errorf("%d ports handed out, want %d", len(handedOut), want)
	}
	for _, al := range []*Allocator{a, b} {
		if snap, err := al.Snapshot(ctx); err != nil || !slices.Equal(snap, handedOut) {
			t.Errorf("Snapshot() = %d ports, %v; want %d", len(snap), err, len(handedOut))
		}
	}
}

// Concurrent allocations and releases of disjoint ports through two
// apiservers: the stored bitmap ends up exactly with what was kept.
func TestConcurrentAllocateAndRelease(t *testing.T) {
	ctx := context.Background()
	a, store, prefix := newAllocator(t, "30000-30999")
	b := New(a.Range(), newRawStore(t, prefix))
	defer b.Close()
	var mu sync.Mutex
	kept := map[int]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 48; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			al := []*Allocator{a, b}[g%2]
			for i := 0; i < 6; i++ {
				ports, errs, err := al.Allocate(ctx, []int{0, 0}, false)
				if err != nil || len(errs) > 0 {
					t.Errorf("Allocate: %v %v", err, kinds(errs))
					return
				}
				// Give one back at once, keep the other.
				if err := al.Release(ctx, ports[:1]); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
				mu.Lock()
				if kept[ports[1]] {
					t.Errorf("port %d kept twice", ports[1])
				}
				kept[ports[1]] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var want []int
	for p := range kept {
		want = append(want, p)
	}
	slices.Sort(want)
	if got := storedPorts(t, store, 30000); !slices.Equal(got, want) {
		t.Errorf("stored %d ports, kept %d\nstored: %v\nkept:   %v", len(got), len(want), got, want)
	}
}

func TestCancelledContext(t *testing.T) {
	a, store, _ := newAllocator(t, "30000-32767")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ports, _, err := a.Allocate(ctx, []int{0}, false); !errors.Is(err, context.Canceled) {
		t.Errorf("Allocate with a cancelled context = %v, %v; want context.Canceled", ports, err)
	}
	if s := stored(t, store); s != nil {
		t.Errorf("a bitmap was written: %+v", s)
	}
}

// After Close, every call fails at once with "node port allocator
// stopped", whatever its context: callers such as the Service registry's
// after-delete hook release with context.Background(), and must not hang
// while the apiserver shuts down.
func TestCallsAfterCloseFailPromptly(t *testing.T) {
	a, store, _ := newAllocator(t, "30000-32767")
	a.Close()
	a.Close() // idempotent; t.Cleanup closes it once more
	// submit picks at random between a free slot in the queue nobody reads
	// any more and the closed done channel: try often enough to see both.
	// The deadline only bounds the test; the allocator must not need it.
	hung := 0
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, _, err := a.Allocate(ctx, []int{0}, false)
		if errors.Is(err, context.DeadlineExceeded) {
			hung++
		} else if err == nil || !strings.Contains(err.Error(), "stopped") {
			t.Errorf("Allocate after Close = %v, want the allocator-stopped error", err)
		}
		err = a.Release(ctx, []int{30001})
		if errors.Is(err, context.DeadlineExceeded) {
			hung++
		} else if err == nil || !strings.Contains(err.Error(), "stopped") {
			t.Errorf("Release after Close = %v, want the allocator-stopped error", err)
		}
		cancel()
	}
	if hung > 0 {
		t.Errorf("%d of 20 calls after Close blocked until their context expired (with context.Background they block forever)", hung)
	}
	if s := stored(t, store); s != nil {
		t.Errorf("a bitmap was written: %+v", s)
	}
}
