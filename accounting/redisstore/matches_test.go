package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// manualClock is memstore's clock in TestMatchesMemstore.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// TestMatchesMemstore drives the Redis store and the memory store through
// the same random sequence of reservations (some of their items
// optional), settlements (late, repeated, refunds and extra charges),
// releases (of reservations made, of ones never made, and before the
// reservation they release), counter resets and clock steps
// (now and then past accounting.RecordTTL), both stores on the same exact
// clock, and requires every answer to be identical, Peek's at every step
// included: the algorithms behave exactly as on the memory store, not
// just within a tolerance. One more seed runs with the functions kept
// off their fast paths.
func TestMatchesMemstore(t *testing.T) {
	srv := redistest.Start(t)
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if err := adminClient(t, srv).FlushDB(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			s := newStore(t, srv, Options{})
			s.general.Store(seed == 4)
			compareWithMemstore(t, s, seed, 3000)
		})
	}
}

func compareWithMemstore(t *testing.T, rs *Store, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	// Start a few minutes before a month ends, so that the calendar
	// window rolls over during the run (New York's five hours later,
	// which the steps of about an hour reach).
	start := time.Date(2026, time.December, 31, 23, 50, 0, 123456000, time.UTC)
	clock := &manualClock{now: start}
	ms := memstore.New(memstore.Options{Now: clock.Now})
	rs.frozen.Store(start.UnixMicro())

	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	limits := []accounting.Limit{
		{Name: "fixed", Algorithm: accounting.FixedWindow, Limit: 100, Window: 10 * time.Second},
		{Name: "berlin-day", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay, Window: 24 * time.Hour, Limit: 300, Location: berlin},
		{Name: "new-york-month", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 1000, Location: newYork},
		{Name: "fixed-odd", Algorithm: accounting.FixedWindow, Limit: 37, Window: 3700 * time.Millisecond},
		{Name: "month", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 1000},
		{Name: "sliding", Algorithm: accounting.SlidingWindow, Limit: 100, Window: 10 * time.Second},
		{Name: "sliding-odd", Algorithm: accounting.SlidingWindow, Limit: 50, Window: 3001 * time.Millisecond},
		{Name: "bucket", Algorithm: accounting.TokenBucket, Limit: 100, Window: 10 * time.Second, Burst: 50},
		{Name: "bucket-odd", Algorithm: accounting.TokenBucket, Limit: 7, Window: 3 * time.Second},
		{Name: "leases", Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Limit: 3, Window: 20 * time.Second},
		{Name: "run", Algorithm: accounting.Lifetime, Limit: 300, Window: time.Minute},
	}
	counters := make([]accounting.Counter, len(limits))
	for i := range limits {
		counters[i] = limits[i].Counter(nil)
	}

	type held struct {
		req accounting.ReserveRequest
		res accounting.ReserveResult
		sr  accounting.SettleRequest
	}
	var open, settled []held
	ctx := context.Background()
	admin := rs.client.(*redis.Client)
	for step := range steps {
		// The sliding windows' stored totals stay the sum of their slots,
		// of which they keep at most SlidingSlots+1.
		for _, c := range counters {
			if c.Algorithm != accounting.SlidingWindow {
				continue
			}
			if v, ok := slidingValue(t, admin, c.Key); ok {
				var sum float64
				for _, amt := range v.slots {
					sum += amt
				}
				if v.total != sum || len(v.slots) > accounting.SlidingSlots+1 || len(v.pieces) > 2*(2*accounting.SlidingSlots+1) {
					t.Fatalf("step %d: sliding window %s: %+v", step, c.Key, v)
				}
			}
		}
		// The read side agrees too, to the last bit, whatever the state.
		wantPeek, err := ms.Peek(ctx, counters)
		if err != nil {
			t.Fatal(err)
		}
		if gotPeek, err := rs.Peek(ctx, counters); err != nil || !slices.Equal(gotPeek, wantPeek) {
			t.Fatalf("step %d: Peek at %v:\n got  %+v (%v)\n want %+v", step, clock.Now(), gotPeek, err, wantPeek)
		}
		switch op := rng.IntN(13); {
		case op < 2: // let time pass: often a little, sometimes a lot
			var d time.Duration
			switch rng.IntN(40) {
			case 0:
				// About the record TTL: records and tombstones expire,
				// and what reservations hold in flight with them.
				d = accounting.RecordTTL + time.Duration(rng.IntN(int((accounting.RecordGrain+time.Minute)/time.Second))-30)*time.Second
			case 1, 2, 3, 4, 5, 6, 7, 8, 9:
				d = time.Duration(rng.IntN(1000)) * time.Microsecond
			case 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29:
				d = time.Duration(rng.IntN(2000)) * time.Millisecond
			default:
				d = time.Duration(rng.IntN(15)) * time.Second
			}
			clock.mu.Lock()
			clock.now = clock.now.Add(d)
			clock.mu.Unlock()
			rs.frozen.Add(d.Microseconds())
		case op < 7: // reserve on one to three counters
			req := accounting.ReserveRequest{ID: fmt.Sprintf("r%d", step)}
			for range 1 + rng.IntN(3) {
				c := counters[rng.IntN(len(counters))]
				if repeatsKind(req.Items, c) {
					continue
				}
				// A quarter are optional: a shadow limit's.
				req.Items = append(req.Items, accounting.ReserveItem{Counter: c, Amount: amount(rng, c), Optional: rng.IntN(4) == 0})
			}
			want, err := ms.Reserve(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rs.Reserve(ctx, req)
			if err != nil {
				t.Fatalf("step %d: Reserve: %v", step, err)
			}
			if !sameResult(got, want) {
				t.Fatalf("step %d: Reserve %+v at %v:\n got  %+v\n want %+v", step, req.Items, clock.Now(), got, want)
			}
			if want.Admitted {
				open = append(open, held{req: req, res: want})
			}
		case op == 12: // reset a counter
			c := counters[rng.IntN(len(counters))]
			want, err := ms.ResetCounter(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := rs.ResetCounter(ctx, c); err != nil || got != want {
				t.Fatalf("step %d: ResetCounter %s: got %v, %v; want %v", step, c.Key, got, err, want)
			}
		case op < 9: // release an open reservation, a settled one, or one not yet made
			var req accounting.ReserveRequest
			fresh := false
			switch r := rng.IntN(4); {
			case r < 2 && len(open) > 0:
				i := rng.IntN(len(open))
				req = open[i].req
				open = append(open[:i], open[i+1:]...)
			case r == 2 && len(settled) > 0:
				req = settled[rng.IntN(len(settled))].req
			default:
				req = accounting.ReserveRequest{ID: fmt.Sprintf("r%d", step)}
				for range 1 + rng.IntN(3) {
					c := counters[rng.IntN(len(counters))]
					if repeatsKind(req.Items, c) {
						continue
					}
					req.Items = append(req.Items, accounting.ReserveItem{Counter: c, Amount: amount(rng, c)})
				}
				fresh = true
			}
			want, err := ms.Release(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rs.Release(ctx, req)
			if err != nil || got != want {
				t.Fatalf("step %d: Release %s: got %v, %v; want %v", step, req.ID, got, err, want)
			}
			if fresh && rng.IntN(2) == 0 {
				// The reservation arrives after its release.
				wantRes, wantErr := ms.Reserve(ctx, req)
				if wantErr != nil && !errors.Is(wantErr, accounting.ErrReleased) {
					t.Fatal(wantErr)
				}
				gotRes, gotErr := rs.Reserve(ctx, req)
				if !errors.Is(gotErr, wantErr) || (wantErr == nil && !sameResult(gotRes, wantRes)) {
					t.Fatalf("step %d: Reserve after its release: got %+v, %v; want %+v, %v", step, gotRes, gotErr, wantRes, wantErr)
				}
			}
		default: // settle an open reservation, or repeat an old one
			var sr accounting.SettleRequest
			switch {
			case len(settled) > 0 && rng.IntN(5) == 0:
				// The same request again: a repeat that applied would show.
				sr = settled[rng.IntN(len(settled))].sr
			case len(open) > 0:
				i := rng.IntN(len(open))
				h := open[i]
				open = append(open[:i], open[i+1:]...)
				sr = accounting.SettleRequest{ID: h.req.ID}
				for i, it := range h.req.Items {
					if it.Optional && !h.res.States[i].Fits {
						// Not charged: the Limiter does not settle it.
						continue
					}
					actual := it.Amount // exact estimates happen too
					if rng.IntN(4) > 0 {
						actual = int64(rng.IntN(90))
					}
					sr.Items = append(sr.Items, accounting.SettleItem{Counter: it.Counter, Reserved: it.Amount, Actual: actual, Mark: h.res.States[i].Mark, Epoch: h.res.States[i].Epoch})
				}
				h.sr = sr
				settled = append(settled, h)
			default:
				continue
			}
			want := ms.Settle(ctx, sr)
			if want != nil && !errors.Is(want, accounting.ErrNoReservation) {
				t.Fatal(want)
			}
			if got := rs.Settle(ctx, sr); !errors.Is(got, want) {
				t.Fatalf("step %d: Settle: got %v, want %v", step, got, want)
			}
		}
	}
}

// amount is a random amount to reserve on c: a lease's is 1 (or 0, which
// takes none), as the Limiter asks.
func amount(rng *rand.Rand, c accounting.Counter) int64 {
	if c.Algorithm == accounting.Leases {
		return int64(rng.IntN(2))
	}
	return int64(rng.IntN(45))
}

// repeatsKind reports whether items already hold c and c is a lease or a
// run. A request names distinct counters (see accounting.ReserveRequest);
// the windows repeat here all the same, as the stores share their state,
// but a lease is per reservation and a run's start is taken once, so for
// them a repeat is a request no Limiter makes.
func repeatsKind(items []accounting.ReserveItem, c accounting.Counter) bool {
	if c.Algorithm != accounting.Leases && c.Algorithm != accounting.Lifetime {
		return false
	}
	for _, it := range items {
		if it.Key == c.Key {
			return true
		}
	}
	return false
}

// sameResult compares a Redis answer with memstore's for req: they must
// be identical, token buckets' float arithmetic included.
func sameResult(a, b accounting.ReserveResult) bool {
	if a.Admitted != b.Admitted || len(a.States) != len(b.States) {
		return false
	}
	for i := range a.States {
		if a.States[i] != b.States[i] {
			return false
		}
	}
	return true
}
