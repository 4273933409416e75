package regions

import (
	"context"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The region's background work: reporting, acquiring ahead, giving back.

// Sync reports the region's use of every counter it leases to the
// ledger, which renews its leases; applies what the ledger reclaimed;
// acquires a chunk for a counter with less than half a chunk left, and
// gives back all but two chunks when more than three are unused.
// [Region.Run] calls it every SyncInterval; the first error is
// returned, the other counters synced regardless.
func (r *Region) Sync(ctx context.Context) error {
	var first error
	for _, lc := range r.all() {
		var err error
		if r.retired(lc) {
			err = r.retire(ctx, lc)
		} else {
			err = r.syncOne(ctx, lc)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Retain tells the region the limits now in force (a reload changed
// them): the counters of limits kept across regions that are not among
// them (the limit was removed, renamed, or no longer kept across
// regions) are given back, all they hold unused, at the next Sync, and
// then no longer synced or leased. Until the first call, every counter
// the region has leased is kept.
func (r *Region) Retain(limits []accounting.Limit) {
	keep := make(map[string]bool)
	for i := range limits {
		if limits[i].AcrossRegions {
			// A limit kept across regions has no scope: one counter,
			// whatever the attributes.
			keep[accounting.CounterKey(&limits[i], nil)] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keep = keep
}

// retired reports whether lc is of a limit no longer in force.
func (r *Region) retired(lc *leased) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keep != nil && !r.keep[lc.key]
}

// retire gives back all lc holds unused, tells the ledger, and forgets
// lc. A request on a Limiter of the last config that asks for lc again
// makes it anew, and the next Sync retires it again.
func (r *Region) retire(ctx context.Context, lc *leased) error {
	if !lc.take(ctx) {
		return ctx.Err()
	}
	err := r.closeOne(ctx, lc)
	lc.done()
	if err != nil {
		return err
	}
	r.log.Info("gave back the lease of a limit no longer in force", "region", r.name, "counter", lc.key)
	r.m.setUnspent(r.name, lc.key, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counters[lc.key] == lc {
		delete(r.counters, lc.key)
	}
	return nil
}

func (r *Region) all() []*leased {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*leased, 0, len(r.counters))
	for _, lc := range r.counters {
		out = append(out, lc)
	}
	return out
}

func (r *Region) syncOne(ctx context.Context, lc *leased) error {
	if !lc.take(ctx) {
		return ctx.Err()
	}
	defer lc.done()
	sent := r.now()
	s, err := r.snapshot(ctx, &lc.c)
	if err != nil {
		return err
	}
	chunk := r.chunkOf(&lc.c)
	left := s.granted - s.used
	if left > 3*chunk {
		if s, err = r.giveBack(ctx, lc, s, left-2*chunk); err != nil {
			return err
		}
	}
	if left, err = r.report(ctx, lc, &s, sent); err != nil {
		return err
	}
	if left < chunk/2+1 {
		if _, err := r.acquire(ctx, lc, s, chunk, sent); err != nil {
			return err
		}
	}
	return nil
}

// giveBack makes amount of the region's unused cap on lc unspendable in
// its store (charged to the counter, in a call that fits only if that
// much is unspent), then counts it as returned (a call of its own: on a
// sharded store the two counters may sit in different slots), before
// the report that tells the ledger: the ledger can then give it to
// another region without the region ever spending it too. A crash
// between the two charges loses amount for the window (the region
// reports it as used); a crash after them, until the next report of any
// replica tells the ledger. It never overspends. It returns the snapshot
// after.
func (r *Region) giveBack(ctx context.Context, lc *leased, s snapshot, amount int64) (snapshot, error) {
	ok, err := r.charge(ctx, s.mark, []accounting.ReserveItem{{Counter: withLimit(lc.c, s.granted), Amount: amount}})
	if err != nil || !ok {
		// Spent meanwhile: nothing to give back now.
		return s, err
	}
	if _, err := r.charge(ctx, s.mark, []accounting.ReserveItem{{Counter: bookkeeping(lc.c, returnsKey, unlimited), Amount: amount}}); err != nil {
		s.used += amount
		return s, err
	}
	r.m.returnedAdd(lc.c.Key, amount)
	s.used += amount
	s.returned += amount
	return s, nil
}

// Close gives back everything this region holds unused and tells the
// ledger, so that the other regions can have it at once rather than
// after the lease lapses. The region's other replicas, if any, acquire
// again what they need.
func (r *Region) Close(ctx context.Context) error {
	var first error
	for _, lc := range r.all() {
		err := ctx.Err()
		if lc.take(ctx) {
			err = r.closeOne(ctx, lc)
			lc.done()
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (r *Region) closeOne(ctx context.Context, lc *leased) error {
	sent := r.now()
	s, err := r.snapshot(ctx, &lc.c)
	if err != nil {
		return err
	}
	if left := s.granted - s.used; left > 0 {
		if s, err = r.giveBack(ctx, lc, s, left); err != nil {
			return err
		}
	}
	_, err = r.report(ctx, lc, &s, sent)
	return err
}

// report tells the ledger the region's use of lc in the window of s,
// which renews its lease, and applies the answer (what the ledger
// reclaimed included); sent is when the call began. It returns what the
// region has left of its cap.
func (r *Region) report(ctx context.Context, lc *leased, s *snapshot, sent time.Time) (int64, error) {
	h, err := r.ledger.Report(ctx, r.name, r.window(&lc.c, *s), s.used-s.returned, s.returned)
	if err != nil {
		r.ledgerFailed(lc, "report", sent, err)
		return 0, err
	}
	r.m.reclaimed(h.Reclaimed)
	return r.apply(ctx, lc, s, h, sent)
}

// Run syncs every SyncInterval until ctx ends.
func (r *Region) Run(ctx context.Context) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Sync(ctx); err != nil {
				r.log.Warn("region sync failed", "region", r.name, "err", err)
			}
		}
	}
}
