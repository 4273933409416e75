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

// nonzero returns a word whose bytes have their high bit set where x's
// bytes are not zero; its other bits are noise, for the caller to mask.
// (No byte's sum carries into the next: 0x7f + 0x7f < 0x100.)
func nonzero(x uint64) uint64 { return ((x & low7s) + low7s) | x }

// above20 returns a word whose bytes have their high bit set where x's
// bytes are above 0x20 (' '); its other bits are noise. Setting each
// byte's high bit first keeps the subtraction from borrowing across
// bytes.
func above20(x uint64) uint64 { return ((x | highs) - x21s) | x }

// runStartBits returns which of eight pairs start a run (see runStarts),
// as the high bit of each pair's byte, given three words: the bytes
// before the pairs' first bytes, their first bytes and their second
// bytes.
func runStartBits(w, x, y uint64) uint64 {
	return nonzero(w^x) & nonzero(y^newlines) &^ (nonzero(x^y) | above20(y)) & highs
}

// isRunByte reports whether c can form a run charged per run: whitespace
// and control bytes other than a newline (newline runs, paragraph breaks,
// are single tokens that cost no more than their pair weights say).
func isRunByte(c byte) bool { return c <= ' ' && c != '\n' }

// count returns the estimated tokens of s in 1/weightOne tokens: one token
// for the first byte, the weight of every adjacent pair of bytes, and the
// run-start cost for every run of two or more identical whitespace bytes
// (other than newlines).
//
// This is the hot path. Each pair costs one 16-bit load of the text and
// one addition from the table (x86 folds the table load into the add).
// The table's entries are the pair weights with runPair added for a pair
// of equal run bytes (see widen), so that sixteen pairs' sum says, above
// its weights, whether they hold a run at all: prose almost never does,
// and the run starts are looked for only where one is.
func (p *profile) count(s string) uint64 {
	n := len(s)
	if n == 0 {
		return 0
	}
	// Loads through base read bytes [0, n) only: the loop bounds say so.
	// Going through unsafe (rather than indexing s) leaves out a bounds
	// check per pair.
	base := unsafe.Pointer(unsafe.StringData(s))
	ld16 := func(i int) uint16 { return *(*uint16)(unsafe.Add(base, i)) }
	ld64 := func(i int) uint64 { return *(*uint64)(unsafe.Add(base, i)) }
	t := &p.wide
	sum := uint64(weightOne)
	starts := 0
	i := 1 // the pairs end at bytes i, i+1, …
	for ; i+16 <= n; i += 16 {
		// Two sums, so that the additions are two chains of eight
		// rather than one of sixteen.
		a := t[ld16(i-1)]
		b := t[ld16(i)]
		a += t[ld16(i+1)]
		b += t[ld16(i+2)]
		a += t[ld16(i+3)]
		b += t[ld16(i+4)]
		a += t[ld16(i+5)]
		b += t[ld16(i+6)]
		a += t[ld16(i+7)]
		b += t[ld16(i+8)]
		a += t[ld16(i+9)]
		b += t[ld16(i+10)]
		a += t[ld16(i+11)]
		b += t[ld16(i+12)]
		a += t[ld16(i+13)]
		b += t[ld16(i+14)]
		a += b
		if a >= runPair {
			if i >= 2 {
				// runStarts, written out: its call costs a fifth
				// of it, and indented text has a run in most blocks.
				// The second word's starts move to bit 6 of each
				// byte, so that one population count takes both.
				m := runStartBits(ld64(i-2), ld64(i-1), ld64(i)) |
					runStartBits(ld64(i+6), ld64(i+7), ld64(i+8))>>1
				starts += bits.OnesCount64(m)
			} else {
				starts += runStarts(s, i, i+16)
			}
			a &= runPair - 1
		}
		sum += uint64(a)
	}
	// The last fifteen pairs or fewer: at most 15 × 0xffff, below runPair.
	var a uint32
	for j := i; j < n; j++ {
		a += t[ld16(j-1)]
	}
	if a >= runPair {
		starts += runStarts(s, i, n)
		a &= runPair - 1
	}
	return sum + uint64(a) + uint64(starts)*uint64(p.runStart)
}

// runStarts returns how many runs charged per run (see isRunByte) start at
// the pairs ending at bytes i to end-1 of s (1 ≤ i ≤ end ≤ len(s)): pairs
// of equal run bytes whose first byte does not equal the byte before it.
// Eight pairs at a time, the test is on three words: the bytes before
// the pairs' first bytes, their first bytes and their second bytes.
func runStarts(s string, i, end int) int {
	base := unsafe.Pointer(unsafe.StringData(s))
	ld64 := func(i int) uint64 { return *(*uint64)(unsafe.Add(base, i)) }
	n := 0
	for ; i+8 <= end; i += 8 {
		x, y := ld64(i-1), ld64(i)
		var w uint64
		if i >= 2 {
			w = ld64(i - 2)
		} else {
			// No byte before the first: one unequal to it.
			w = x<<8 | uint64(^s[0])
		}
		n += bits.OnesCount64(runStartBits(w, x, y))
	}
	for ; i < end; i++ {
		if c := s[i]; s[i-1] == c && isRunByte(c) && (i < 2 || s[i-2] != c) {
			n++
		}
	}
	return n
}

// tokens returns p's estimate of s scaled by scale, rounded up.
func (p *profile) tokens(s string, scale float64) int64 {
	if len(s) == 0 {
		return 0
	}
	return int64(math.Ceil(float64(p.count(s)) * scale / weightOne))
}
