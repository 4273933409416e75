package accounting

import (
	"context"
	"errors"
	"time"
)

// Settled reports whether Settle has been called.
func (r *Reservation) Settled() bool { return r.settled.Load() }

// Settle books usage in place of the estimate, exactly once: the first
// call settles, later calls return false and do nothing. It reports
// whether this call settled.
//
// The requests dimension keeps its 1; tokens become usage.Total(); cost
// becomes usage priced for the reservation's model; a concurrent limit's
// lease is returned (its actual is 0), whatever the usage. A zero Usage (the
// upstream refused the request) therefore refunds all tokens and cost.
// Even a settlement equal to the estimate reaches the store, which then
// only deletes the reservation's record.
//
// If the store fails, the settlement is retried in the background for
// Options.SettleRetry and then given up (logged and counted; the estimate
// stays charged). The returned error is that first failure; the
// settlement is still in hand. If the store no longer holds the
// reservation (it was reserved more than RecordTTL ago, or the store lost
// its data), nothing can be booked: Settle logs and counts that and
// returns nil.
func (r *Reservation) Settle(ctx context.Context, usage Usage) (bool, error) {
	return r.settle(ctx, usage, nil, false)
}

// settle is Settle, with the provider's corrections of pf when not nil
// (see [Reservation.SettleProvider]); with keep, every item but a lease
// settles on what it reserved, whatever usage says (see
// [Reservation.Hold]).
func (r *Reservation) settle(ctx context.Context, usage Usage, pf *providerFeedback, keep bool) (bool, error) {
	if !r.settled.CompareAndSwap(false, true) {
		return false, nil
	}
	if len(r.items) == 0 {
		return true, nil
	}
	l := r.l
	req := SettleRequest{ID: r.ID, Items: r.settleItems[:0]}
	if cap(req.Items) < len(r.items) {
		req.Items = make([]SettleItem, 0, len(r.items))
	}
	req.Items = req.Items[:len(r.items)]
	var cost int64
	if r.hasPrice {
		cost = r.price.UsageCost(usage)
	}
	for i, it := range r.items {
		actual := it.amount
		switch it.limit.Dimension {
		case Tokens:
			if !keep {
				actual = usage.Total()
			}
		case Cost:
			if !keep {
				actual = cost
			}
		case Concurrent:
			// The lease goes back.
			actual = 0
			l.m.leases.WithLabelValues(it.limit.Name).Dec()
		}
		if pf != nil {
			extra, block := l.providerCharge(&r.items[i], actual, pf)
			actual += extra
			if block.Actual > 0 {
				// After the reservation's items, a charge of its own on
				// the same counter, booked where it is gone in time.
				req.Items = append(req.Items, block)
			}
		}
		req.Items[i] = SettleItem{Counter: it.counter, Reserved: it.amount, Actual: actual, Mark: it.mark, Epoch: it.epoch}
	}
	// Settlement must happen even when the caller's context is cancelled
	// (the client went away): that is exactly when it matters. The store
	// bounds the call (see Store), so no cancellation is needed to end it.
	err := l.store.Settle(context.WithoutCancel(ctx), req)
	switch {
	case err == nil:
		l.m.settledFirstTry()
		return true, nil
	case errors.Is(err, ErrNoReservation):
		l.noRecord(r.ID, r.at)
		return true, nil
	}
	l.m.storeErrors.WithLabelValues("settle").Inc()
	// Without the provider's blocks: one booked later would last longer
	// than the provider said.
	req.Items = req.Items[:len(r.items)]
	l.settleLater(req, r.at, !errors.Is(err, ErrNotApplied))
	return true, err
}

// noRecord counts and logs a settlement the store had no record for.
func (l *Limiter) noRecord(id string, at time.Time) {
	l.m.settlements.WithLabelValues("no_record").Inc()
	l.log.Warn("settlement found no reservation record (older than the record TTL, or lost by the store); the estimate stays charged",
		"reservation", id, "age", time.Since(at).Round(time.Millisecond), "record_ttl", RecordTTL)
}

// settleLater retries a failed settlement in the background. The store
// applies a settlement only while the reservation's record exists and
// deletes the record in the same step, so a retry after an ambiguous
// failure (the earlier attempt did land) finds no record and changes
// nothing. maybeApplied says whether an earlier attempt may have landed:
// if none could have, finding no record means it expired or was lost.
func (l *Limiter) settleLater(req SettleRequest, at time.Time, maybeApplied bool) {
	l.later(func(ctx context.Context) error {
		err := l.store.Settle(ctx, req)
		switch {
		case err == nil:
			l.m.settlements.WithLabelValues("retried").Inc()
			return nil
		case errors.Is(err, ErrNoReservation):
			if maybeApplied {
				l.m.settlements.WithLabelValues("retried").Inc()
			} else {
				l.noRecord(req.ID, at)
			}
			return nil
		}
		maybeApplied = maybeApplied || !errors.Is(err, ErrNotApplied)
		return err
	}, func(err error) {
		l.m.settlements.WithLabelValues("lost").Inc()
		l.log.Error("settlement lost; the estimate stays charged", "reservation", req.ID, "err", err)
	})
}

// releaseLater undoes, in the background, a reservation whose Reserve
// failed without a clear answer: the store refunds it if it was applied,
// and otherwise makes sure it never will be.
func (l *Limiter) releaseLater(req ReserveRequest) {
	l.later(func(ctx context.Context) error {
		released, err := l.store.Release(ctx, req)
		if err != nil {
			return err
		}
		if released {
			l.m.releases.WithLabelValues("released").Inc()
			l.log.Info("released a reservation the store had applied after its call failed", "reservation", req.ID)
		} else {
			l.m.releases.WithLabelValues("not_applied").Inc()
		}
		return nil
	}, func(err error) {
		l.m.releases.WithLabelValues("lost").Inc()
		l.log.Error("release lost; if the store applied the reservation, it stays charged until its window passes",
			"reservation", req.ID, "err", err)
	})
}

// later runs try in the background until it returns nil: first 50ms from
// now, then with backoff doubling to 5s, for Options.SettleRetry, then
// calls gaveUp with the last error. It takes one of the bounded retry
// slots; when none is free it gives up at once.
func (l *Limiter) later(try func(ctx context.Context) error, gaveUp func(err error)) {
	select {
	case l.retrySlots <- struct{}{}:
	default:
		gaveUp(errors.New("too many settlements and releases pending"))
		return
	}
	l.m.pendingRetry.Inc()
	l.retries.Add(1)
	go func() {
		defer func() {
			<-l.retrySlots
			l.m.pendingRetry.Dec()
			l.retries.Done()
		}()
		deadline := time.Now().Add(l.settleRetry)
		backoff := 50 * time.Millisecond
		for {
			wait := time.NewTimer(backoff)
			select {
			case <-wait.C:
			case <-l.closing:
				wait.Stop()
			}
			// Bounded by the store, like every store call.
			err := try(context.Background())
			if err == nil {
				return
			}
			if time.Now().After(deadline) || l.isClosing() {
				gaveUp(err)
				return
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
}

func (l *Limiter) isClosing() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

// Close makes pending settlements and releases try once more at once, and
// waits for them until ctx ends. Settle must not be called after Close.
func (l *Limiter) Close(ctx context.Context) error {
	l.closeOnce.Do(func() { close(l.closing) })
	done := make(chan struct{})
	go func() {
		l.retries.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("accounting: settlements still retrying at close")
	}
}
