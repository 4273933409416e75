package tokenizer

import (
	"math"
	"math/bits"
	"unsafe"
)

// SWAR constants: a byte repeated across a 64-bit word.
const (
	low7s    = 0x7f7f7f7f7f7f7f7f
	highs    = 0x8080808080808080
	x21s     = 0x2121212121212121
	newlines = 0x0a0a0a0a0a0a0a0a
)

// zeroBytes returns a word with the high bit set in each byte of x that is
// zero, and no other bits (no false positives, unlike the shorter trick).
func zeroBytes(x uint64) uint64 {
	return ^((x & low7s) + low7s | x) & highs
}

// runBytes returns a word with the high bit set in each byte of x that
// can form a run charged per run: whitespace and control bytes other
// than a newline (newline runs, paragraph breaks, are single tokens that
// cost no more than their pair weights say).
func runBytes(x uint64) uint64 {
	return ^((x | highs) - x21s | x) & highs &^ zeroBytes(x^newlines)
}

// isRunByte is runBytes for one byte.
func isRunByte(c byte) bool { return c <= ' ' && c != '\n' }

// count returns the estimated tokens of s in 1/weightOne tokens: one token
// for the first byte, the weight of every adjacent pair of bytes, and the
// run-start cost for every run of two or more identical whitespace bytes
// (other than newlines).
//
// This is the hot path, and branch-free on the text. Each pair costs one
// 16-bit load of the text and one table load; run starts are found eight
// pairs at a time: a pair of equal whitespace bytes whose preceding pair
// was not one.
func (p *profile) count(s string) uint64 {
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
		runs := zeroBytes(x^y) & runBytes(x)
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

// tokens returns p's estimate of s scaled by scale, rounded up.
func (p *profile) tokens(s string, scale float64) int64 {
	if len(s) == 0 {
		return 0
	}
	return int64(math.Ceil(float64(p.count(s)) * scale / weightOne))
}
