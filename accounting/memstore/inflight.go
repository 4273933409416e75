package memstore

import "github.com/tokenwarden/tokenwarden/accounting"

// What reservations in flight hold (accounting.CounterState.InFlight). A
// counter keeps, per piece (accounting.InFlightPiece: a record grain, for
// a sliding window split at its slots' bounds too), the amounts of the
// reservations charged in it that are neither settled nor released. A
// piece stops counting all at once, exactly when its reservations'
// records expire (or its slot leaves the window), so a few sums per
// counter stay exact however many reservations there are: at most
// SlidingSlots+1 pieces count at a time (2×SlidingSlots+1 for a sliding
// window, whose slots and grains interleave), and pieces that stopped
// counting are dropped whenever one is added.
//
// A fixed window's or a run's pieces hold only what was charged to its
// current window or run, and are cleared when that changes; a token
// bucket's outlive the bucket being full again, so the counter is kept
// (keep) until its last piece stops counting.

// piece is the amount reservations in flight hold in the piece starting
// at at (µs).
type piece struct {
	at, amount int64
}

// held returns what the counter's pieces that still count at now hold.
func (ct *counter) held(c *accounting.Counter, now int64) int64 {
	from := accounting.InFlightFrom(c, now)
	var sum int64
	for _, p := range ct.pieces {
		if p.at >= from {
			sum += p.amount
		}
	}
	return sum
}

// inFlight is accounting.CounterState.InFlight for a counter whose pieces
// hold held and that has remaining left.
func inFlight(c *accounting.Counter, held, remaining int64) int64 {
	return max(0, min(held, c.Capacity()-remaining))
}

// hold adds amount, charged at now, to its piece, dropping the pieces
// that no longer count.
func (ct *counter) hold(c *accounting.Counter, amount, now int64) {
	if amount <= 0 {
		return
	}
	at := accounting.InFlightPiece(c, now)
	from := accounting.InFlightFrom(c, now)
	kept := ct.pieces[:0]
	found := false
	for _, p := range ct.pieces {
		switch {
		case p.at == at:
			p.amount += amount
			found = true
		case p.at < from || p.amount == 0:
			continue
		}
		kept = append(kept, p)
	}
	clear(ct.pieces[len(kept):])
	if !found {
		kept = append(kept, piece{at: at, amount: amount})
	}
	ct.pieces = kept
	if c.Algorithm == accounting.TokenBucket {
		// A bucket may be full again long before its pieces stop
		// counting: keep it until they do.
		ct.keep = max(ct.keep, accounting.RecordExpiry(now))
	}
}

// unhold takes amount, charged at t (µs) by a reservation now settled or
// released, out of its piece.
func (ct *counter) unhold(c *accounting.Counter, amount, t int64) {
	at := accounting.InFlightPiece(c, t)
	for i := range ct.pieces {
		if p := &ct.pieces[i]; p.at == at {
			p.amount = max(0, p.amount-amount)
			return
		}
	}
}

// until is when the counter may be dropped: its state expired and nothing
// else keeps it.
func (ct *counter) until() int64 { return max(ct.expires, ct.keep) }
