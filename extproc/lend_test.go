package extproc

import (
	"bytes"
	"fmt"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// TestLendTier: a buffer for n bytes has the smallest power of two from
// 512 that holds n as its capacity, and goes back to the tier it came
// from.
func TestLendTier(t *testing.T) {
	for _, tc := range []struct {
		n, want int // the bytes asked for, the capacity lent
	}{
		{0, 512}, {1, 512}, {512, 512}, {513, 1024}, {1024, 1024}, {1025, 2048},
		{2300, 4096}, {4096, 4096}, {8193, 16384}, {maxLent, maxLent},
	} {
		var p lendPool
		b := p.get(tc.n)
		if cap(*b) != tc.want {
			t.Errorf("get(%d): got capacity %d, want %d", tc.n, cap(*b), tc.want)
		}
		if got := tier(cap(*b)); got != tier(tc.n) {
			t.Errorf("get(%d) gave a buffer put back in tier %d, want %d", tc.n, got, tier(tc.n))
		}
	}
}

// TestBorrowBounds: a stream lends at most maxBorrowed pooled buffers to
// a reply, none larger than maxLent, and sent gives them all back.
func TestBorrowBounds(t *testing.T) {
	var st stream
	if b := st.borrow(maxLent + 1); b != nil {
		t.Errorf("borrow(maxLent+1): got a buffer of capacity %d, want nil", cap(b))
	}
	for i := range maxBorrowed {
		if b := st.borrow(100); cap(b) < 100 || len(b) != 0 {
			t.Fatalf("borrow %d: got len %d cap %d, want an empty buffer with room for 100", i, len(b), cap(b))
		}
	}
	if b := st.borrow(100); b != nil {
		t.Errorf("borrow past maxBorrowed: got a buffer of capacity %d, want nil", cap(b))
	}
	st.sent()
	if st.borrowed != 0 || st.lent != [maxBorrowed]*[]byte{} {
		t.Errorf("after sent: got %d borrowed, %v lent, want none", st.borrowed, st.lent)
	}
}

// TestLentUntilSent: the buffers a reply borrows stay its own until
// Process has sent it. Each reply, when sent, is encoded, then every
// buffer the pool holds is taken and overwritten, as other streams
// borrowing them would, and the reply is encoded again: it must not
// change. Given back before the send, the reply's buffers would be among
// those overwritten (a pool hands back first what it was last given on
// the same processor).
func TestLentUntilSent(t *testing.T) {
	msgs := lifecycleMessages(t, "t1")
	srv := lifecycleServer(t)
	check := func(i int, r *extprocv3.ProcessingResponse) error {
		before, err := proto.Marshal(r)
		if err != nil {
			return err
		}
		var taken []*[]byte
		for tr := range lendTiers {
			for range 4 {
				b := replyBufs.get(1 << (tr + minLentShift))
				full := (*b)[:cap(*b)]
				for j := range full {
					full[j] = 0xee
				}
				taken = append(taken, b)
			}
		}
		for _, b := range taken {
			replyBufs.put(b)
		}
		after, err := proto.Marshal(r)
		if err != nil {
			return err
		}
		if !bytes.Equal(before, after) {
			at := 0
			for at < min(len(before), len(after)) && before[at] == after[at] {
				at++
			}
			return fmt.Errorf("reply %d changed once other streams borrowed from the pool: %d bytes, then %d, differing from byte %d", i, len(before), len(after), at)
		}
		return nil
	}
	// The buffers of one lifecycle go back to the pool for the next to
	// borrow.
	for range 3 {
		s := &replayStream{ctx: t.Context(), msgs: msgs, check: check, hand: true}
		if err := srv.Process(s); err != nil {
			t.Fatal(err)
		}
		if s.err != nil {
			t.Fatal(s.err)
		}
		if s.sent != len(msgs) {
			t.Fatalf("got %d replies, want %d", s.sent, len(msgs))
		}
	}
}
