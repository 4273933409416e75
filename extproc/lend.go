package extproc

import (
	"math/bits"
	"sync"
)

// A reply that carries bytes of its own (the edited request body, the
// release's encoding, the response headers' mutation, a settlement's
// metadata) is written into buffers lent from a pool for the time
// between building it and sending it, and given back once Process has
// sent it. grpc-go encodes a message before SendMsg returns, with the
// server's codec, into a buffer of the codec's own (tokenwarden's codec
// copies a reply written in wire form into one: codec.go), and, its
// request tracing aside (below), reads nothing of the message after
// that.
//
// Garbage collection, not tokenwarden's own code, was the largest part
// of what a lifecycle cost beyond the do-nothing server: the collector's
// work per lifecycle grows with the bytes allocated, and about 6 KB of
// the 8.7 KB tokenwarden allocated per lifecycle beyond the do-nothing
// server were these buffers, each dead as soon as its reply was sent (see BENCHMARKS.md, "The bytes a
// lifecycle allocates").
//
// What could read a reply later is the host's: grpc-go's request
// tracing (grpc.EnableTracing, the /debug/requests page) keeps every
// sent message and formats it when the page is viewed, so a stream it
// traces (it decides when the stream begins, and says so in the
// stream's context) lends nothing, and its replies allocate as before. A stats handler or an interceptor of the host's that keeps the
// message passed to SendMsg and reads it later would see its bytes
// overwritten by other streams' replies; what Envoy receives is not
// affected.

// lendPool holds the buffers lent to replies, by capacity: one pool for
// each power of two from minLent to maxLent bytes.
type lendPool struct {
	tiers [lendTiers]sync.Pool // of *[]byte
}

const (
	minLentShift = 9 // 512 bytes
	maxLentShift = 14
	// maxLent is the largest buffer lent: a release written in wire form
	// (maxWireRelease) with its metadata fits. Larger ones are allocated.
	maxLent   = 1 << maxLentShift
	lendTiers = maxLentShift - minLentShift + 1
)

// replyBufs is the pool every stream borrows from. Like any sync.Pool it
// is a cache, which the collector empties; a buffer is lent to one reply
// at a time.
var replyBufs lendPool

// tier returns the index of the smallest tier that holds n bytes;
// n is at most maxLent.
func tier(n int) int {
	if n <= 1<<minLentShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minLentShift
}

// get returns a buffer of capacity at least n (at most maxLent), from
// the pool or new. Its bytes are whatever the last borrower left.
func (p *lendPool) get(n int) *[]byte {
	t := tier(n)
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1<<(t+minLentShift))
	return &b
}

// put gives b, from get, back to the pool.
func (p *lendPool) put(b *[]byte) {
	p.tiers[tier(cap(*b))].Put(b)
}

// maxBorrowed is the most buffers one reply borrows: the edited body
// and the release's encoding.
const maxBorrowed = 2

// borrow returns an empty buffer with room for n bytes, lent to the
// reply being built until it is sent (see [stream.sent]): what is
// appended to it must not outlive the reply. For more than maxLent
// bytes, past maxBorrowed buffers, or on a stream that lends nothing
// (noLend), it returns nil, and appending allocates: a megabyte body's
// edit, which may not happen at all, does not allocate a megabyte up
// front.
func (st *stream) borrow(n int) []byte {
	if n > maxLent || st.borrowed >= maxBorrowed || st.noLend {
		return nil
	}
	b := replyBufs.get(n)
	st.lent[st.borrowed] = b
	st.borrowed++
	return (*b)[:0]
}

// sent gives back the buffers lent to the reply just sent.
func (st *stream) sent() {
	for i := range st.borrowed {
		replyBufs.put(st.lent[i])
		st.lent[i] = nil
	}
	st.borrowed = 0
}
