package accounting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Holds. Some calls spend long after the request that starts them ends: a
// message batch is created by one request, runs for up to a day, and
// reports what it cost in its results, which the client fetches with
// another request days later. Such a call is reserved like any other
// when it is created; when the creating request succeeds, the
// reservation becomes a hold ([Reservation.Hold]): its charge stays on
// every counter, and a record in the store keeps it settleable, exactly
// once, for [HoldTTL]. The request that brings the usage takes the hold
// ([Limiter.TakeHold]) and settles it ([Held.Settle]). A hold nobody
// takes expires with its charge in place: a call whose cost is never
// seen is charged its whole estimate.
//
// A hold keeps what its settlement needs, so that any replica, running
// any config, settles it as it was reserved: the counters and what each
// was charged (and its mark), and the price. A concurrent limit's lease
// is not held: it counts the creating request, which has ended.

// HoldTTL is how long a hold can be settled: a message batch runs for up
// to 24 hours, and its results are kept for 29 days after it ends.
const HoldTTL = 30 * 24 * time.Hour

// ErrHeld is returned by [Holder.Hold] when a hold of the same ID is live
// already: nothing changed.
var ErrHeld = errors.New("accounting: a hold of that ID exists")

// ErrNotHoldable is returned when the Limiter's Store does not implement
// [Holder].
var ErrNotHoldable = errors.New("accounting: the store cannot keep holds")

// Holder is implemented by Stores that keep holds; memstore and
// redisstore do, and the storetest package's RunHolds holds them to one
// behaviour.
type Holder interface {
	// Hold records req.ID as a reservation that counts for req.TTL on
	// the store's clock (not RecordTTL; rounded as [HoldExpiry] says),
	// charging nothing, and keeps
	// req.Data under it: a Settle of req.ID (on counters among
	// req.Counters) within the TTL applies once and deletes the record,
	// as a reservation's does. It returns ErrHeld, changing nothing,
	// when a hold of req.ID is live.
	Hold(ctx context.Context, req HoldRequest) error
	// TakeHold returns the Data of hold id and deletes it, atomically:
	// of callers racing for one hold, one gets it. The record stays for
	// the Settle. ErrNoReservation when there is no live hold of id.
	TakeHold(ctx context.Context, id string) ([]byte, error)
}

// HoldRequest asks a [Holder] for a hold.
type HoldRequest struct {
	ID string
	// Counters are those a settlement of the hold names: a Store may keep
	// the record where they are (a Redis Cluster slot each).
	Counters []Counter
	TTL      time.Duration
	Data     []byte
}

// holdData is what a hold keeps: what its settlement needs, and its
// caller's note.
type holdData struct {
	Note     []byte     `json:"note,omitempty"`
	Model    string     `json:"model"`
	Price    *Price     `json:"price,omitempty"` // nil: no price
	Items    []heldItem `json:"items"`
	Reserved Estimate   `json:"reserved"`
}

// heldItem is one counter a hold corrects at settlement.
type heldItem struct {
	Limit     string        `json:"limit"`
	Dimension Dimension     `json:"dimension"`
	Key       string        `json:"key"`
	Algorithm Algorithm     `json:"algorithm"`
	Max       int64         `json:"max"`
	Burst     int64         `json:"burst,omitempty"`
	Window    time.Duration `json:"window"`
	Calendar  Calendar      `json:"calendar,omitempty"`
	Location  string        `json:"location,omitempty"` // "" is UTC
	Reserved  int64         `json:"reserved"`
	Mark      int64         `json:"mark"`
	// Epoch is the counter's CounterState.Epoch: a hold made before the
	// counter was reset changes nothing on it.
	Epoch int64 `json:"epoch,omitempty"`
}

// counter returns the item's Counter.
func (it *heldItem) counter() (Counter, error) {
	c := Counter{Key: it.Key, Algorithm: it.Algorithm, Limit: it.Max, Burst: it.Burst, Window: it.Window, Calendar: it.Calendar}
	if it.Location != "" {
		loc, err := time.LoadLocation(it.Location)
		if err != nil {
			return c, fmt.Errorf("limit %s: %w", it.Limit, err)
		}
		c.Location = loc
	}
	return c, nil
}

// Hold turns the admitted, unsettled reservation into the hold id, with
// note kept for whoever takes it (see [Limiter.TakeHold]), and settles
// the reservation itself on its estimate: every charge stays where it
// is, and its leases go back. Should the hold fail (the error says why),
// the charges stay all the same, with nothing left to correct them: the
// safe direction. A reservation that charged nothing (admitted without
// limits, or failed open) makes no hold.
func (r *Reservation) Hold(ctx context.Context, id string, note []byte) error {
	if r.Settled() {
		return errors.New("accounting: the reservation is settled already")
	}
	var err error
	if d, counters := r.holdData(note); len(counters) > 0 {
		err = r.l.hold(ctx, id, d, counters)
	}
	// Every charge stays; only the leases are returned.
	_, settleErr := r.settle(ctx, Usage{}, nil, true)
	return errors.Join(err, settleErr)
}

// holdData is what the hold of r keeps, and the counters it corrects.
func (r *Reservation) holdData(note []byte) (holdData, []Counter) {
	d := holdData{Note: note, Model: r.Model, Reserved: r.Estimate}
	if r.hasPrice {
		p := r.price
		d.Price = &p
	}
	var counters []Counter
	for _, it := range r.items {
		if it.limit.Dimension == Concurrent {
			continue
		}
		c := it.counter
		hi := heldItem{Limit: it.limit.Name, Dimension: it.limit.Dimension, Key: c.Key, Algorithm: c.Algorithm,
			Max: c.Limit, Burst: c.Burst, Window: c.Window, Calendar: c.Calendar, Reserved: it.amount, Mark: it.mark, Epoch: it.epoch}
		if c.Location != nil && c.Location != time.UTC {
			hi.Location = c.Location.String()
		}
		d.Items = append(d.Items, hi)
		counters = append(counters, c)
	}
	return d, counters
}

// hold writes the hold id of d on counters.
func (l *Limiter) hold(ctx context.Context, id string, d holdData, counters []Counter) error {
	h, ok := l.store.(Holder)
	if !ok {
		return ErrNotHoldable
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	err = h.Hold(context.WithoutCancel(ctx), HoldRequest{ID: id, Counters: counters, TTL: HoldTTL, Data: data})
	if err != nil && !errors.Is(err, ErrHeld) {
		l.m.storeErrors.WithLabelValues("hold").Inc()
	}
	return err
}

// Held is a hold taken from the store ([Limiter.TakeHold]), to be settled
// once: by [Held.Settle] with the usage, or by [Held.Keep].
type Held struct {
	// ID is the hold's.
	ID string
	// Note is what [Reservation.Hold] was given.
	Note []byte
	// Model is the reserved request's.
	Model string
	// Reserved is the estimate the hold keeps charged.
	Reserved Estimate

	l     *Limiter
	price Price
	// hasPrice: the model had a price at the reservation.
	hasPrice bool
	items    []heldItem
}

// TakeHold takes the hold id from the store: of the callers racing for
// it, one gets it; the others, and any caller once it has expired, get
// ErrNoReservation. The Held must then be settled, or its charge stays
// until its counters' windows pass.
func (l *Limiter) TakeHold(ctx context.Context, id string) (*Held, error) {
	h, ok := l.store.(Holder)
	if !ok {
		return nil, ErrNotHoldable
	}
	data, err := h.TakeHold(ctx, id)
	if err != nil {
		if !errors.Is(err, ErrNoReservation) {
			l.m.storeErrors.WithLabelValues("take_hold").Inc()
		}
		return nil, err
	}
	var d holdData
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("accounting: hold %s: %w", id, err)
	}
	held := &Held{ID: id, Note: d.Note, Model: d.Model, Reserved: d.Reserved, l: l, items: d.Items}
	if d.Price != nil {
		held.price, held.hasPrice = *d.Price, true
	}
	return held, nil
}

// Settle books usage in place of the hold's estimate, as
// [Reservation.Settle] books a reservation's: tokens become
// usage.Total(), cost the usage priced as at the reservation, a request
// stays one. A store failure is retried in the background, as a
// reservation's settlement is; the error is the first failure.
func (h *Held) Settle(ctx context.Context, usage Usage) error {
	var cost int64
	if h.hasPrice {
		cost = h.price.UsageCost(usage)
	}
	return h.settle(ctx, func(it *heldItem) int64 {
		switch it.Dimension {
		case Tokens:
			return usage.Total()
		case Cost:
			return cost
		}
		return it.Reserved
	})
}

// Keep settles the hold on its estimate: the charge stays, and the hold's
// record goes. It is what a caller does with a hold whose usage it could
// not read.
func (h *Held) Keep(ctx context.Context) error {
	return h.settle(ctx, func(it *heldItem) int64 { return it.Reserved })
}

// settle settles the hold's items at actual's amounts.
func (h *Held) settle(ctx context.Context, actual func(*heldItem) int64) error {
	req := SettleRequest{ID: h.ID, Items: make([]SettleItem, 0, len(h.items))}
	for i := range h.items {
		it := &h.items[i]
		c, err := it.counter()
		if err != nil {
			// Nothing can be booked on a counter the store cannot
			// place: its charge stays.
			h.l.log.Warn("hold item cannot be settled; its charge stays", "hold", h.ID, "err", err)
			continue
		}
		req.Items = append(req.Items, SettleItem{Counter: c, Reserved: it.Reserved, Actual: actual(it), Mark: it.Mark, Epoch: it.Epoch})
	}
	l := h.l
	err := l.store.Settle(context.WithoutCancel(ctx), req)
	switch {
	case err == nil:
		l.m.settledFirstTry()
		return nil
	case errors.Is(err, ErrNoReservation):
		l.m.settlements.WithLabelValues("no_record").Inc()
		l.log.Warn("hold settlement found no record (expired, or lost by the store); the estimate stays charged", "hold", h.ID)
		return nil
	}
	l.m.storeErrors.WithLabelValues("settle").Inc()
	l.settleLater(req, time.Now(), !errors.Is(err, ErrNotApplied))
	return err
}
