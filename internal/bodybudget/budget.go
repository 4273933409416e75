package bodybudget

import "sync"

// Budget counts the bytes of request bodies in flight, against a total
// and a per-principal share of it. It is safe for concurrent use; the
// zero value admits nothing.
type Budget struct {
	mu    sync.Mutex
	total int64 // the most in flight at once
	share int64 // the most one principal has in flight at once
	used  int64
	// by holds the bytes each principal has in flight; a principal
	// with none has no entry, so the map holds at most one entry per
	// body in flight.
	by map[string]int64
}

// Outcome is the answer to a charge.
type Outcome uint8

const (
	// Admitted: the bytes are charged.
	Admitted Outcome = iota
	// OverShare: the principal's bodies in flight and this one together
	// are more than a principal's share.
	OverShare
	// Full: the bodies in flight and this one together are more than
	// the total.
	Full
	// TooLarge: the body alone is more than a principal's share (or
	// than the total): it can never be admitted.
	TooLarge
)

// New returns a Budget of total bytes in flight, of which one principal
// may hold share.
func New(total, share int64) *Budget {
	b := &Budget{by: map[string]int64{}}
	b.SetLimits(total, share)
	return b
}

// SetLimits changes the total and the share. Bytes in flight stay
// charged; when they are more than the new limits, charges are refused
// until enough are released.
func (b *Budget) SetLimits(total, share int64) {
	b.mu.Lock()
	b.total, b.share = total, min(share, total)
	b.mu.Unlock()
}

// Limits returns the total and the share.
func (b *Budget) Limits() (total, share int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, b.share
}

// Used returns the bytes in flight.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Charge charges n bytes (n ≥ 0) to principal, if they fit.
func (b *Budget) Charge(principal string, n int64) Outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o := b.fits(principal, n, n); o != Admitted {
		return o
	}
	b.add(principal, n)
	return Admitted
}

// Resize changes principal's charge of from bytes (charged earlier) to
// to bytes: a body found to be larger or smaller than it was charged
// for. Less always fits; more is checked as a charge of the difference
// would be, and on anything but Admitted the charge stays from.
func (b *Budget) Resize(principal string, from, to int64) Outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	if to > from {
		if o := b.fits(principal, to, to-from); o != Admitted {
			return o
		}
	}
	b.add(principal, to-from)
	return Admitted
}

// Release gives back n bytes charged to principal.
func (b *Budget) Release(principal string, n int64) {
	b.mu.Lock()
	b.add(principal, -n)
	b.mu.Unlock()
}

// fits reports whether more bytes fit, for a body of size bytes. b.mu is
// held.
func (b *Budget) fits(principal string, size, more int64) Outcome {
	switch {
	case size > b.share:
		return TooLarge
	case b.by[principal]+more > b.share:
		return OverShare
	case b.used+more > b.total:
		return Full
	}
	return Admitted
}

// add adds n (negative to release) to principal's charge. b.mu is held.
func (b *Budget) add(principal string, n int64) {
	if n == 0 {
		return
	}
	b.used += n
	if v := b.by[principal] + n; v > 0 {
		b.by[principal] = v
	} else {
		delete(b.by, principal)
	}
}
