package nodeport

import (
	"bytes"
	"math/big"
	"testing"
)

// upstreamBytes is what kube-apiserver's allocationBitmap (a big.Int with
// bit i set for offset i) stores in RangeAllocation.data: big.Int.Bytes().
func upstreamBytes(offsets ...int) []byte {
	b := new(big.Int)
	for _, off := range offsets {
		b.SetBit(b, off, 1)
	}
	return b.Bytes()
}

func TestBitmapEncoding(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		offsets []int
		want    []byte
	}{
		{name: "empty", size: 2768, offsets: nil, want: []byte{}},
		{name: "offset 0", size: 2768, offsets: []int{0}, want: []byte{0x01}},
		{name: "0, 3, 9", size: 2768, offsets: []int{0, 3, 9}, want: []byte{0x02, 0x09}},
		{name: "8", size: 2768, offsets: []int{8}, want: []byte{0x01, 0x00}},
		{name: "7 and 15", size: 20, offsets: []int{7, 15}, want: []byte{0x80, 0x80}},
		{name: "all of a 20-port range", size: 20, offsets: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, want: []byte{0x0f, 0xff, 0xff}},
		{name: "last of 30000-32767", size: 2768, offsets: []int{2767}, want: upstreamBytes(2767)},
		{name: "first and last", size: 2768, offsets: []int{0, 2767}, want: upstreamBytes(0, 2767)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bm := decodeBitmap(nil, tt.size)
			for _, off := range tt.offsets {
				bm.set(off)
			}
			got := bm.encode()
			if !bytes.Equal(got, tt.want) {
				t.Errorf("encode() = %x, want %x", got, tt.want)
			}
			if !bytes.Equal(got, upstreamBytes(tt.offsets...)) {
				t.Errorf("encode() = %x, kube-apiserver stores %x", got, upstreamBytes(tt.offsets...))
			}
			if bm.count() != len(tt.offsets) {
				t.Errorf("count() = %d, want %d", bm.count(), len(tt.offsets))
			}
			// Decoding kube-apiserver's bytes gives the same set.
			back := decodeBitmap(tt.want, tt.size)
			set := map[int]bool{}
			for _, off := range tt.offsets {
				set[off] = true
			}
			for off := 0; off < tt.size; off++ {
				if back.has(off) != set[off] {
					t.Errorf("decoded has(%d) = %v, want %v", off, back.has(off), set[off])
				}
			}
			if back.count() != len(tt.offsets) {
				t.Errorf("decoded count() = %d, want %d", back.count(), len(tt.offsets))
			}
		})
	}
}

func TestBitmapSetClearClone(t *testing.T) {
	bm := decodeBitmap(upstreamBytes(1, 70, 200), 2768)
	c := bm.clone()
	c.set(5)
	c.clear(70)
	if bm.has(5) || !bm.has(70) {
		t.Errorf("changing a clone changed the original: has(5)=%v has(70)=%v", bm.has(5), bm.has(70))
	}
	if !c.has(5) || c.has(70) || !c.has(1) || !c.has(200) {
		t.Errorf("clone = %x, want offsets 1, 5, 200", c.encode())
	}
	// Clearing a clear bit and setting a set one change nothing.
	c.clear(71)
	c.set(200)
	if !bytes.Equal(c.encode(), upstreamBytes(1, 5, 200)) {
		t.Errorf("encode() = %x, want %x", c.encode(), upstreamBytes(1, 5, 200))
	}
	// Clearing the top bit shortens the encoding, as big.Int does.
	c.clear(200)
	if !bytes.Equal(c.encode(), upstreamBytes(1, 5)) || c.count() != 2 {
		t.Errorf("after clearing 200: %x (count %d), want %x", c.encode(), c.count(), upstreamBytes(1, 5))
	}
}

func TestBitmapFree(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		set      []int
		from, to int
		// want lists every acceptable answer; empty means -1.
		want []int
	}{
		{name: "empty range", size: 20, from: 5, to: 4},
		{name: "inverted range", size: 20, from: 16, to: 0},
		{name: "single free", size: 20, set: []int{16, 17, 19}, from: 16, to: 19, want: []int{18}},
		{name: "all set", size: 20, set: []int{16, 17, 18, 19}, from: 16, to: 19},
		{name: "free outside the window only", size: 20, set: []int{3, 4}, from: 3, to: 4},
		{name: "lower band", size: 20, set: []int{0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, from: 0, to: 15, want: []int{3}},
		{name: "one-port window", size: 20, from: 7, to: 7, want: []int{7}},
		{name: "several free", size: 20, set: []int{17}, from: 16, to: 19, want: []int{16, 18, 19}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bm := decodeBitmap(upstreamBytes(tt.set...), tt.size)
			seen := map[int]bool{}
			// free starts at a random place: ask often enough to see them all.
			for i := 0; i < 200; i++ {
				got := bm.free(tt.from, tt.to)
				if len(tt.want) == 0 {
					if got != -1 {
						t.Fatalf("free(%d, %d) = %d, want -1", tt.from, tt.to, got)
					}
					continue
				}
				ok := false
				for _, w := range tt.want {
					ok = ok || got == w
				}
				if !ok {
					t.Fatalf("free(%d, %d) = %d, want one of %v", tt.from, tt.to, got, tt.want)
				}
				seen[got] = true
			}
			if len(seen) != len(tt.want) {
				t.Errorf("200 calls returned %v; every one of %v should come up (random start)", seen, tt.want)
			}
		})
	}
}

func TestStaticBand(t *testing.T) {
	tests := []struct{ size, want int }{
		{size: 1, want: 0},
		{size: 10, want: 0},
		{size: 16, want: 0},
		{size: 17, want: 16},
		{size: 20, want: 16},
		{size: 512, want: 16},
		{size: 544, want: 17},
		{size: 2768, want: 86}, // 30000-32767
		{size: 4096, want: 128},
		{size: 4127, want: 128},
		{size: 65535, want: 128},
	}
	for _, tt := range tests {
		if got := staticBand(tt.size); got != tt.want {
			t.Errorf("staticBand(%d) = %d, want min(max(16, size/32), 128) = %d", tt.size, got, tt.want)
		}
	}
}
