package accounting

import (
	"errors"
	"fmt"
)

// Reconfigure returns a Limiter that applies opts' limits, prices and
// settlement retry on l's store, sharing with l what must outlive a
// config: the metrics, the reservation IDs, and the settlements and
// releases retrying in the background (and their bound). It is how a
// config reload changes the limits without losing a settlement.
//
// l is left as it is: a Limiter is never changed once made, so a
// reservation settles under the limits and prices it was reserved under,
// whichever Limiter a caller has moved on to since. In particular a limit
// that opts leaves out still gets the settlements of the reservations
// made on it; a new limit starts from its counter as the store holds it.
//
// Of opts' other fields: Store must be nil or l's store, and
// MaxPendingSettlements, MaxWaiting and MaxWaitingPerKey zero or the
// bounds l was made with (the retry slots and the requests waiting for
// capacity are shared, so none of them can change); Logger nil means
// l's, Regional nil l's, and Now nil l's; Registerer is ignored (the metrics are l's,
// and count for the new limits too). Validate's problems are returned as New returns them.
// Closing any of the Limiters made this way closes them all: they share
// one set of retries.
func (l *Limiter) Reconfigure(opts Options) (*Limiter, error) {
	if opts.Store != nil && opts.Store != l.store {
		return nil, errors.New("accounting: Reconfigure cannot change the store")
	}
	if opts.MaxPendingSettlements != 0 && opts.MaxPendingSettlements != cap(l.retrySlots) {
		return nil, fmt.Errorf("accounting: Reconfigure cannot change MaxPendingSettlements (%d) to %d",
			cap(l.retrySlots), opts.MaxPendingSettlements)
	}
	if (opts.MaxWaiting != 0 && opts.MaxWaiting != l.waits.max) || (opts.MaxWaitingPerKey != 0 && opts.MaxWaitingPerKey != l.waits.perKey) {
		return nil, fmt.Errorf("accounting: Reconfigure cannot change MaxWaiting (%d) or MaxWaitingPerKey (%d)", l.waits.max, l.waits.perKey)
	}
	// Built as New builds, on l's shared parts rather than new ones.
	opts.Store = l.store
	if opts.Regional == nil {
		// The region leases for the process, whatever the limits.
		opts.Regional = l.regional
	}
	if opts.Logger == nil {
		opts.Logger = l.log
	}
	if opts.Now == nil {
		opts.Now = l.now
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("accounting: invalid options: %w", err)
	}
	if err := opts.validateRegional(); err != nil {
		return nil, err
	}
	return newLimiter(opts, l.m, l.background), nil
}
