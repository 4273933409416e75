package regions

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The region's own counters of a leased counter, in its store, in the
// same windows: what the ledger granted it, what it made unspendable
// (returned, or reclaimed by the ledger), and its incarnation: a random
// id the first replica to look stamps on the store for the window, and
// every replica then reads. The counter itself holds what the region
// spent plus what it made unspendable. Their keys extend the counter's,
// which no [accounting.CounterKey] does (a key's last field is
// "length:value").
const (
	grantsKey      = "|granted"
	returnsKey     = "|returned"
	incarnationKey = "|incarnation"
)

// maxIncarnation bounds the ids a region stamps: a store's counters are
// exact to 2^53.
const maxIncarnation = 1 << 52

// snapshot is the region's holding of a counter, read from its store.
type snapshot struct {
	used, granted, returned int64
	mark                    int64
	// incarnation is the store's id for the window (never 0 once
	// [Region.snapshot] returns).
	incarnation int64
}

func withLimit(c accounting.Counter, limit int64) accounting.Counter {
	c.Limit = limit
	return c
}

func bookkeeping(c accounting.Counter, suffix string, limit int64) accounting.Counter {
	c.Key += suffix
	c.Limit = limit
	return c
}

// snapshot reads the region's holding of c in the store's current
// window. A store without an incarnation for the window (the window is
// new, or the store forgot its counters) is stamped with a random one,
// written only if absent: a charge of the id under the id as the limit
// fits only a counter at zero, so of replicas stamping at once one wins
// and all read its id.
func (r *Region) snapshot(ctx context.Context, c *accounting.Counter) (snapshot, error) {
	s, err := r.read(ctx, c)
	if err != nil || s.incarnation != 0 {
		return s, err
	}
	id, err := randomIncarnation()
	if err != nil {
		return snapshot{}, err
	}
	if _, err := r.charge(ctx, s.mark, []accounting.ReserveItem{{Counter: bookkeeping(*c, incarnationKey, id), Amount: id}}); err != nil {
		return snapshot{}, err
	}
	if s, err = r.read(ctx, c); err != nil {
		return s, err
	}
	if s.incarnation == 0 {
		return snapshot{}, fmt.Errorf("regions: could not stamp an incarnation on %s", c.Key)
	}
	return s, nil
}

func randomIncarnation() (int64, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(maxIncarnation-1))
	if err != nil {
		return 0, fmt.Errorf("regions: drawing an incarnation: %w", err)
	}
	return n.Int64() + 1, nil
}

// read reads the region's holding of c in the store's current window,
// by a reservation of nothing on its four counters.
func (r *Region) read(ctx context.Context, c *accounting.Counter) (snapshot, error) {
	items := []accounting.ReserveItem{
		{Counter: withLimit(*c, unlimited)},
		{Counter: bookkeeping(*c, grantsKey, unlimited)},
		{Counter: bookkeeping(*c, returnsKey, unlimited)},
		{Counter: bookkeeping(*c, incarnationKey, unlimited)},
	}
	id := r.nextID()
	res, err := r.store.Reserve(ctx, accounting.ReserveRequest{ID: id, Items: items})
	if err != nil {
		return snapshot{}, err
	}
	if !res.Admitted || len(res.States) != 4 {
		return snapshot{}, fmt.Errorf("regions: the store refused a reservation of nothing on %s", c.Key)
	}
	r.drop(ctx, id, items, res.States)
	st := res.States
	return snapshot{
		used:        unlimited - st[0].Remaining,
		granted:     unlimited - st[1].Remaining,
		returned:    unlimited - st[2].Remaining,
		incarnation: unlimited - st[3].Remaining,
		mark:        st[0].Mark,
	}, nil
}

// raise brings the region's bookkeeping counter suffix of c up to target
// in window mark, charging also (when not nil) the counter also by as
// much, first and in a call of its own: on a sharded store the two
// counters may sit in different slots, which one call does not change
// atomically, and a crash between the two must leave the budget
// unspendable, not counted as returned and still spendable. Each try
// charges what the last snapshot lacked, under target as the limit, so
// that two replicas raising at once never take it past target (also may
// then be charged twice: budget lost for the window, never spent
// twice).
func (r *Region) raise(ctx context.Context, c *accounting.Counter, mark int64, suffix string, target int64, also *accounting.Counter) error {
	for range 8 {
		s, err := r.snapshot(ctx, c)
		if err != nil {
			return err
		}
		if s.mark != mark {
			return errWindowMoved
		}
		have := s.granted
		if suffix == returnsKey {
			have = s.returned
		}
		if have >= target {
			return nil
		}
		if also != nil {
			if _, err := r.charge(ctx, mark, []accounting.ReserveItem{{Counter: withLimit(*also, unlimited), Amount: target - have}}); err != nil {
				return err
			}
		}
		ok, err := r.charge(ctx, mark, []accounting.ReserveItem{{Counter: bookkeeping(*c, suffix, target), Amount: target - have}})
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("regions: could not bring %s%s to %d", c.Key, suffix, target)
}

// errWindowMoved reports that the store moved to the next window during
// an operation on the last one: the operation is moot.
var errWindowMoved = errors.New("regions: the store's window moved")

// charge reserves items in window mark and keeps the charge (dropping the
// reservation's record); it reports false if they did not fit. A charge
// the store made in another window is released.
func (r *Region) charge(ctx context.Context, mark int64, items []accounting.ReserveItem) (bool, error) {
	id := r.nextID()
	req := accounting.ReserveRequest{ID: id, Items: items}
	res, err := r.store.Reserve(ctx, req)
	if err != nil {
		if !errors.Is(err, accounting.ErrNotApplied) {
			// It may have landed: undo it, or keep it from landing.
			_, _ = r.store.Release(context.WithoutCancel(ctx), req)
		}
		return false, err
	}
	if !res.Admitted {
		return false, nil
	}
	for _, st := range res.States {
		if st.Mark != mark {
			_, err := r.store.Release(context.WithoutCancel(ctx), req)
			return false, errors.Join(errWindowMoved, err)
		}
	}
	r.drop(ctx, id, items, res.States)
	return true, nil
}

// drop deletes a reservation's record, keeping its charges.
func (r *Region) drop(ctx context.Context, id string, items []accounting.ReserveItem, states []accounting.CounterState) {
	settle := accounting.SettleRequest{ID: id, Items: make([]accounting.SettleItem, len(items))}
	for i, it := range items {
		settle.Items[i] = accounting.SettleItem{Counter: it.Counter, Reserved: it.Amount, Actual: it.Amount, Mark: states[i].Mark}
	}
	// A record left behind costs memory until accounting.RecordTTL, and
	// nothing else.
	_ = r.store.Settle(context.WithoutCancel(ctx), settle)
}

func (r *Region) nextID() string {
	return r.idPrefix + strconv.FormatUint(r.idSeq.Add(1), 36)
}
