package nodeport

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// Fuzzed operations run on a 20-port range (30000-30019: 30000-30015 kept
// for requested ports, 30016-30019 handed out first), small enough to fill.
const (
	fuzzRange = "30000-30019"
	fuzzBase  = 30000
	fuzzSize  = 20
	fuzzBand  = 16
	// fuzzMaxOps bounds the operations of one input, so each stays fast.
	fuzzMaxOps = 48
)

// Operation bytes: the low two bits choose the kind, bits 3-5 a count, the
// top bit the apiserver (allocator A or B, sharing the bitmap). Port
// bytes: 240 and above ask for any port (0), others map onto
// 29998-30021, two ports on each side of the range.
const (
	opAllocate = iota
	opDryRun
	opDynamic
	opRelease
)

func fuzzOp(kind, count int, onB bool) byte {
	b := byte(kind) | byte(count-1)<<3
	if onB {
		b |= 0x80
	}
	return b
}

func fuzzPort(p int) byte {
	if p == 0 {
		return 0xff
	}
	return byte(p - 29998)
}

func decodePort(b byte) int {
	if b >= 240 {
		return 0
	}
	return 29998 + int(b)%24
}

// seed builds an input from operations written as (op, ports...) groups.
func seed(groups ...[]byte) []byte {
	var out []byte
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func step(kind int, onB bool, ports ...int) []byte {
	n := len(ports)
	if kind == opDynamic {
		n = ports[0]
		ports = nil
	}
	b := []byte{fuzzOp(kind, n, onB)}
	for _, p := range ports {
		b = append(b, fuzzPort(p))
	}
	return b
}

// FuzzNodePortAllocator runs random sequences of allocations (requested,
// dynamic, mixed), dry runs and releases through two allocators sharing
// one bitmap in etcd (two apiservers), against a model: every answer is
// the one the model predicts (which entries are refused and why; dynamic
// picks are free, and in the upper part while it has room), no port is
// handed out twice, and the stored bitmap, decoded as kube-apiserver
// does, always equals the model.
func FuzzNodePortAllocator(f *testing.F) {
	// Fill the range dynamically, overflow it, give one back, take it again.
	f.Add(seed(step(opDynamic, false, 6), step(opDynamic, true, 6), step(opDynamic, false, 6), step(opDynamic, true, 6),
		step(opRelease, false, 30003), step(opDynamic, true, 1), step(opDynamic, false, 1)))
	// Requested ports: free, taken, out of range on both sides, twice in
	// one call, with a dynamic one; then a dry run of the same.
	f.Add(seed(step(opAllocate, false, 30000), step(opAllocate, true, 30000), step(opAllocate, false, 29999, 30020),
		step(opAllocate, true, 30005, 30005), step(opAllocate, false, 0, 30001, 30019), step(opDryRun, true, 30001, 0, 0)))
	// Dry runs never change the bitmap, even when everything fits.
	f.Add(seed(step(opDryRun, false, 0, 0, 0), step(opDryRun, true, 30016, 30017), step(opDynamic, false, 4), step(opDryRun, false, 0)))
	// Release what another apiserver allocated, out-of-range and free ports.
	f.Add(seed(step(opAllocate, true, 30010, 30011, 30012), step(opRelease, false, 30011, 29998, 30021), step(opRelease, true, 30011),
		step(opAllocate, false, 30011)))

	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		prefix := newPrefix()
		store := newRawStore(t, prefix)
		pr := portRange(t, fuzzRange)
		apiservers := [2]*Allocator{New(pr, store), New(pr, newRawStore(t, prefix))}
		defer apiservers[0].Close()
		defer apiservers[1].Close()

		model := map[int]bool{}
		ops := 0
		for i := 0; i < len(data) && ops < fuzzMaxOps; ops++ {
			b := data[i]
			i++
			kind, count, a := int(b&3), 1+int(b>>3)&7, apiservers[b>>7]
			var ports []int
			if kind == opDynamic {
				ports = make([]int, count)
			} else {
				for ; len(ports) < count && i < len(data); i++ {
					ports = append(ports, decodePort(data[i]))
				}
			}
			what := fmt.Sprintf("op %d (kind %d on %c, ports %v)", ops, kind, "AB"[b>>7], ports)

			if kind == opRelease {
				if err := a.Release(ctx, ports); err != nil {
					t.Fatalf("%s: Release: %v", what, err)
				}
				for _, p := range ports {
					delete(model, p)
				}
				checkStored(t, what, a, model)
				continue
			}

			dryRun := kind == opDryRun
			wantErrs, free := predict(model, ports)
			got, errs, err := a.Allocate(ctx, ports, dryRun)
			if err != nil {
				t.Fatalf("%s: Allocate: %v", what, err)
			}
			if !sameKinds(errs, wantErrs) {
				t.Fatalf("%s: refused %v, the model says %v (held %v)", what, kinds(errs), wantErrs, sortedKeys(model))
			}
			if len(wantErrs) > 0 {
				if got != nil {
					t.Fatalf("%s: a refused call returned ports %v", what, got)
				}
				checkStored(t, what, a, model)
				continue
			}
			if len(got) != len(ports) {
				t.Fatalf("%s: %d ports for %d asked", what, len(got), len(ports))
			}
			next := map[int]bool{}
			for p := range model {
				next[p] = true
			}
			for j, p := range ports {
				if p != 0 {
					if got[j] != p {
						t.Fatalf("%s: asked for %d, got %d", what, p, got[j])
					}
					next[p] = true
				}
			}
			for j, p := range ports {
				if p != 0 {
					continue
				}
				q := got[j]
				if q < fuzzBase || q >= fuzzBase+fuzzSize || next[q] {
					t.Fatalf("%s: dynamic pick %d is out of range or held (held %v)", what, q, sortedKeys(next))
				}
				if upperHasRoom(next) && q < fuzzBase+fuzzBand {
					t.Fatalf("%s: dynamic pick %d is in the static band while the upper part has room (held %v)", what, q, sortedKeys(next))
				}
				next[q] = true
				free--
			}
			if free < 0 {
				t.Fatalf("%s: more ports handed out than were free", what)
			}
			if !dryRun {
				model = next
			}
			checkStored(t, what, a, model)
		}
	})
}

// predict says which entries of want the allocator must refuse, given the
// held ports, and how many ports are free once the requested ones are
// taken.
func predict(held map[int]bool, want []int) (map[int]string, int) {
	work := map[int]bool{}
	for p := range held {
		work[p] = true
	}
	errs := map[int]string{}
	for i, p := range want {
		switch {
		case p == 0:
		case p < fuzzBase || p >= fuzzBase+fuzzSize:
			errs[i] = "notInRange"
		case work[p]:
			errs[i] = "allocated"
		default:
			work[p] = true
		}
	}
	free := fuzzSize - len(work)
	left := free
	for i, p := range want {
		if p != 0 {
			continue
		}
		if left == 0 {
			errs[i] = "full"
			continue
		}
		left--
	}
	return errs, free
}

func upperHasRoom(held map[int]bool) bool {
	for p := fuzzBase + fuzzBand; p < fuzzBase+fuzzSize; p++ {
		if !held[p] {
			return true
		}
	}
	return false
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// checkStored compares the bitmap in etcd, decoded independently and
// through Snapshot, with the model.
func checkStored(t *testing.T, what string, a *Allocator, model map[int]bool) {
	t.Helper()
	want := sortedKeys(model)
	got := storedPorts(t, a.store, fuzzBase)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: stored %v, the model holds %v", what, got, want)
	}
	if ra := stored(t, a.store); ra != nil && ra.Range != fuzzRange {
		t.Fatalf("%s: stored range %q", what, ra.Range)
	}
	snap, err := a.Snapshot(context.Background())
	if err != nil || !slices.Equal(snap, want) {
		t.Fatalf("%s: Snapshot() = %v, %v; the model holds %v", what, snap, err, want)
	}
}
