package tokenizer

import (
	"math/bits"
	"unsafe"
)

// swarZeroBytes returns a word with the high bit set in each byte of x
// that is zero, and no other bits (no false positives, unlike the shorter
// trick).
func swarZeroBytes(x uint64) uint64 {
	return ^((x & low7s) + low7s | x) & highs
}

// swarRunBytes returns a word with the high bit set in each byte of x
// that can form a run charged per run (see isRunByte).
func swarRunBytes(x uint64) uint64 {
	return ^((x | highs) - x21s | x) & highs &^ swarZeroBytes(x^newlines)
}

// swarCount is profile.count as it was before the table marked the pairs
// that can run: it looks for run starts in every eight pairs. It is kept
// to hold the count to, on any bytes (FuzzCount): the two must agree
// exactly, not nearly.
//
// It returns the estimated tokens of s in 1/weightOne tokens: one token
// for the first byte, the weight of every adjacent pair of bytes, and the
// run-start cost for every run of two or more identical whitespace bytes
// (other than newlines).
//
// It was the hot path, and branch-free on the text. Each pair costs one
// 16-bit load of the text and one table load; run starts are found eight
// pairs at a time: a pair of equal whitespace bytes whose preceding pair
// was not one.
func swarCount(p *profile, s string) uint64 {
	n := len(s)
	if n == 0 {
		return 0
	}
	// Loads through base read bytes [0, n) only: the loop bounds say so.
	// Unaligned loads are fine on the platforms Go supports for them;
	// going through unsafe (rather than binary.LittleEndian on a slice)
	// keeps the compiler from rebuilding the 64-bit words byte by byte.
	base := unsafe.Pointer(unsafe.StringData(s))
	ld16 := func(i int) uint16 { return *(*uint16)(unsafe.Add(base, i)) }
	ld64 := func(i int) uint64 { return *(*uint64)(unsafe.Add(base, i)) }
	t := &p.pairs
	sum := uint64(weightOne)
	starts := 0
	prev := uint64(0) // the previous block's run pairs
	i := 1
	for ; i+8 <= n; i += 8 {
		sum += (uint64(t[ld16(i-1)]) + uint64(t[ld16(i)]) + uint64(t[ld16(i+1)]) + uint64(t[ld16(i+2)])) +
			(uint64(t[ld16(i+3)]) + uint64(t[ld16(i+4)]) + uint64(t[ld16(i+5)]) + uint64(t[ld16(i+6)]))
		x := ld64(i - 1) // the first bytes of the 8 pairs
		y := ld64(i)     // their second bytes
		runs := swarZeroBytes(x^y) & swarRunBytes(x)
		if m := runs &^ (runs<<8 | prev>>56); m != 0 {
			// Runs of whitespace are rare in prose: the count of
			// their starts is left out of the usual round.
			starts += bits.OnesCount64(m)
		}
		prev = runs
	}
	for ; i < n; i++ {
		sum += uint64(t[ld16(i-1)])
		if c := s[i]; s[i-1] == c && isRunByte(c) && (i < 2 || s[i-2] != c) {
			starts++
		}
	}
	return sum + uint64(starts)*uint64(p.runStart)
}
