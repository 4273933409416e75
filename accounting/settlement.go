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
// becomes usage priced for the reservation's model. A zero Usage (the
// upstream refused the request) therefore refunds all tokens and cost.
//
// If the store fails, the settlement is retried in the background for
// Options.SettleRetry and then given up (logged and counted; the estimate
// stays charged). The returned error is that first failure; the
// settlement is still in hand.
func (r *Reservation) Settle(ctx context.Context, usage Usage) (bool, error) {
	if !r.settled.CompareAndSwap(false, true) {
		return false, nil
	}
	if len(r.items) == 0 {
		return true, nil
	}
	l := r.l
	req := SettleRequest{ID: r.ID, Items: make([]SettleItem, len(r.items))}
	var cost int64
	if price, ok := l.prices.Lookup(r.Model); ok {
		cost = price.UsageCost(usage)
	}
	changed := false
	for i, it := range r.items {
		actual := it.amount
		switch it.limit.Dimension {
		case Tokens:
			actual = usage.Total()
		case Cost:
			actual = cost
		}
		req.Items[i] = SettleItem{Counter: it.counter, Reserved: it.amount, Actual: actual, Mark: it.mark}
		changed = changed || actual != it.amount
	}
	if !changed {
		// The estimate was exact (or only requests were counted): there
		// is nothing to book, and no store round trip to pay for.
		l.m.settlements.WithLabelValues("ok").Inc()
		return true, nil
	}
	// Settlement must happen even when the caller's context is cancelled
	// (the client went away): that is exactly when it matters.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.storeTimeout)
	err := l.store.Settle(sctx, req)
	cancel()
	if err == nil {
		l.m.settlements.WithLabelValues("ok").Inc()
		return true, nil
	}
	l.m.storeErrors.WithLabelValues("settle").Inc()
	l.retryLater(req)
	return true, err
}

// retryLater retries a failed settlement in the background with backoff.
// The store's idempotence makes a retry after an ambiguous failure (the
// first call did land) harmless.
func (l *Limiter) retryLater(req SettleRequest) {
	select {
	case l.retrySlots <- struct{}{}:
	default:
		l.m.settlements.WithLabelValues("lost").Inc()
		l.log.Error("settlement lost: too many pending retries; the estimate stays charged", "reservation", req.ID)
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
			ctx, cancel := context.WithTimeout(context.Background(), l.storeTimeout)
			err := l.store.Settle(ctx, req)
			cancel()
			if err == nil {
				l.m.settlements.WithLabelValues("retried").Inc()
				return
			}
			if time.Now().After(deadline) || l.isClosing() {
				l.m.settlements.WithLabelValues("lost").Inc()
				l.log.Error("settlement lost after retrying; the estimate stays charged",
					"reservation", req.ID, "err", err)
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

// Close makes pending settlement retries try once more at once, and waits
// for them until ctx ends. Settle must not be called after Close.
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
