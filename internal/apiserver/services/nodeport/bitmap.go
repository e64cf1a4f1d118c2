package nodeport

import (
	"math/big"
	"math/rand/v2"
)

// bitmap is the set of allocated offsets of a port range, in the encoding
// kube-apiserver stores: a big integer whose bit i is offset i, serialized
// big-endian (RangeAllocation.data). Data is compatible both ways.
type bitmap struct {
	bits *big.Int
	size int
}

func decodeBitmap(data []byte, size int) *bitmap {
	return &bitmap{bits: new(big.Int).SetBytes(data), size: size}
}

func (b *bitmap) encode() []byte { return b.bits.Bytes() }

func (b *bitmap) clone() *bitmap {
	return &bitmap{bits: new(big.Int).Set(b.bits), size: b.size}
}

func (b *bitmap) has(offset int) bool { return b.bits.Bit(offset) == 1 }

func (b *bitmap) set(offset int) { b.bits.SetBit(b.bits, offset, 1) }

func (b *bitmap) clear(offset int) { b.bits.SetBit(b.bits, offset, 0) }

func (b *bitmap) count() int {
	n := 0
	for _, w := range b.bits.Bits() {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// free returns a free offset in [from, to], scanning from a random start,
// or -1.
func (b *bitmap) free(from, to int) int {
	n := to - from + 1
	if n <= 0 {
		return -1
	}
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		off := from + (start+i)%n
		if !b.has(off) {
			return off
		}
	}
	return -1
}
