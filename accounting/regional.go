package accounting

import (
	"context"
	"errors"
	"fmt"
)

// Regional keeps the limits marked [Limit.AcrossRegions]: one budget that
// several regions, each with its own store, spend together. The regions
// package implements it; see there for the model.
//
// The Limiter asks it for the region's cap on such a counter and
// reserves on its own store with the cap as the counter's limit, so that
// a request is decided where it arrives, by one store call, as any other.
// A cap only grows within a window, so a cap read a moment ago is at most
// too low: the safe side.
type Regional interface {
	// Cap returns what the region may have charged on c, in all, in the
	// window mark ([CounterState.Mark]) its cap is for. c's Limit is the
	// global limit.
	Cap(c *Counter) (capacity, mark int64)
	// Grow is called when amount did not fit on c under its cap, or was
	// charged in another window than the cap's: it acquires more of the
	// global budget for the region, or learns the new window's cap,
	// within its own bound on time, and reports whether amount may now
	// fit. mark is the window the store refused or charged amount in
	// ([CounterState.Mark]): when it is not the cap's, the window has
	// turned, whatever the region knew of the last one's budget.
	Grow(ctx context.Context, c *Counter, amount, mark int64) bool
}

// errLeaseGrown makes reserve try once more: a counter kept across
// regions was short of what its region held, and the region acquired
// more.
var errLeaseGrown = errors.New("accounting: the region's lease grew")

// leaseCap is the region's cap an item was reserved under.
type leaseCap struct {
	across bool // the item's limit is kept across regions
	mark   int64
	limit  int64 // the global limit, which the cap replaced in the item
}

// global returns item i's counter with the global limit.
func (c leaseCap) global(it *ReserveItem) *Counter {
	g := it.Counter
	g.Limit = c.limit
	return &g
}

// leaseCaps replaces the limit of each item of a limit kept across
// regions with its region's cap, and returns the caps, one per item; nil
// when no item is kept across regions.
func (l *Limiter) leaseCaps(items []ReserveItem, reserved []reservedItem) []leaseCap {
	var caps []leaseCap
	for i := range items {
		if !reserved[i].limit.AcrossRegions || l.regional == nil {
			continue
		}
		if caps == nil {
			caps = make([]leaseCap, len(items))
		}
		caps[i].across, caps[i].limit = true, items[i].Limit
		items[i].Limit, caps[i].mark = l.regional.Cap(&items[i].Counter)
		// A region may hold more than the limit now is (a reload
		// lowered it): no region spends past the limit itself.
		items[i].Limit = min(items[i].Limit, caps[i].limit)
	}
	return caps
}

// leaseStates corrects the states of the items reserved under region
// caps: a request larger than the region's cap may well fit the global
// limit, so whether it can never fit is the global limit's to say.
func leaseStates(items []ReserveItem, states []CounterState, caps []leaseCap) {
	for i := range states {
		if caps[i].across && !states[i].Fits {
			states[i].NeverFits = items[i].Amount > caps[i].limit
		}
	}
}

// leaseShort reports whether a reservation under region caps should be
// tried again: it was refused by a cap alone and the region grew (only
// when grow), or it was admitted under a cap of another window than the
// one the store charged. Such an admission is released whatever grow
// says: it must not stand on an old window's cap.
func (l *Limiter) leaseShort(ctx context.Context, req ReserveRequest, res ReserveResult, caps []leaseCap, grow bool) bool {
	if res.Admitted {
		stale := -1
		for i, st := range res.States {
			// A charge of nothing spent nothing under the old cap.
			if caps[i].across && st.Mark != caps[i].mark && req.Items[i].Amount > 0 {
				stale = i
			}
		}
		if stale < 0 {
			return false
		}
		// Released at once (it happens once a window), so that the
		// retry does not find its own charge in the way; in the
		// background if the store fails, like any release.
		if _, err := l.store.Release(context.WithoutCancel(ctx), req); err != nil {
			l.releaseLater(req)
		}
		if grow {
			for i, st := range res.States {
				if caps[i].across && st.Mark != caps[i].mark && req.Items[i].Amount > 0 {
					l.regional.Grow(ctx, caps[i].global(&req.Items[i]), req.Items[i].Amount, st.Mark)
				}
			}
		}
		return true
	}
	if !grow {
		return false
	}
	short := -1
	for i, st := range res.States {
		switch {
		case st.Fits || req.Items[i].Optional:
		case caps[i].across && short < 0:
			short = i
		default:
			// Another limit refuses it, or a second cap: more of one
			// budget would not let it through.
			return false
		}
	}
	if short < 0 {
		return false
	}
	it := &req.Items[short]
	return l.regional.Grow(ctx, caps[short].global(it), it.Amount, res.States[short].Mark)
}

// validateRegional reports a limit kept across regions without a
// Regional to keep it.
func (o *Options) validateRegional() error {
	if o.Regional != nil {
		return nil
	}
	for i := range o.Limits {
		if o.Limits[i].AcrossRegions {
			return FieldErrorf(fmt.Sprintf("limits[%d].across_regions", i), "no regions are configured")
		}
	}
	return nil
}

// validateAcross reports why the limit cannot be kept across regions, if
// it is marked so. A region's cap stands in for the limit on one counter
// that counts up within a window and starts afresh with the next, which
// is what a fixed or calendar window is and the other algorithms are not;
// and the regions lease per counter, so a scoped limit (a counter per
// tenant, say) would have them lease without bound.
func (l *Limit) validateAcross() []error {
	if !l.AcrossRegions {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, FieldErrorf("across_regions", format, args...))
	}
	if l.Algorithm != FixedWindow || l.Dimension == Concurrent {
		bad("only a fixed_window limit (a calendar day or month included) can be kept across regions")
	}
	if len(l.Scope) > 0 {
		bad("a limit kept across regions has one global counter: it takes no scope")
	}
	if l.From != nil || l.ReserveFor != nil {
		bad("a limit kept across regions takes its value from the ledger: no limit_from or reserve_for")
	}
	if l.Mode == Shadow {
		bad("a shadow limit is not kept across regions")
	}
	return errs
}
