package accounting_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// blockStart is a minute's start on the clock of the block tests.
var blockStart = time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)

// clockedLimiter returns a Limiter on a memory store, both on c.
func clockedLimiter(t *testing.T, c *clock, limits ...accounting.Limit) (*accounting.Limiter, *memstore.Store) {
	t.Helper()
	store := memstore.New(memstore.Options{Now: c.Now})
	l, err := accounting.New(accounting.Options{Store: store, Limits: limits, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeLimiter(t, l) })
	return l, store
}

// TestProviderBlock: a provider's 429 that leaves a provider limit
// nothing blocks it for every caller, for at most the provider's
// retry-after and at most MaxProviderBlock (also when it states none),
// with a charge that the counter's own algorithm lets go within that
// time; where it cannot, nothing is blocked.
func TestProviderBlock(t *testing.T) {
	retry := func(d time.Duration) accounting.ProviderState {
		return accounting.ProviderState{RateLimited: true, RetryAfter: d, HasRetryAfter: true}
	}
	sliding := perMinute("provider-tpm", accounting.Tokens, 10000)
	fixed := func(w time.Duration) accounting.Limit {
		l := sliding
		l.Algorithm, l.Window = accounting.FixedWindow, w
		return l
	}
	bucket := sliding
	bucket.Algorithm = accounting.TokenBucket
	lifetime := sliding
	lifetime.Algorithm, lifetime.Window = accounting.Lifetime, time.Hour
	tests := []struct {
		name string
		lim  accounting.Limit
		// at is when the request is reserved, after blockStart; elapsed
		// how long after that it settles.
		at, elapsed time.Duration
		ps          accounting.ProviderState
		// left is what the counter has right after the settlement, and
		// still when the block has free left to go; by free it is full.
		left int64
		free time.Duration
	}{
		{"no retry-after: a minute", sliding, 2 * time.Second, 300 * time.Millisecond, accounting.ProviderState{RateLimited: true}, 0, time.Minute},
		{"the provider's retry-after", sliding, 2 * time.Second, 300 * time.Millisecond, retry(20 * time.Second), 0, 20 * time.Second},
		{"a retry-after past the bound: a minute", sliding, 2 * time.Second, 0, retry(2 * time.Hour), 0, time.Minute},
		{"a request that took long", sliding, 2 * time.Second, 45 * time.Second, retry(30 * time.Second), 0, 30 * time.Second},
		{"a figure of 0 blocks as none does", sliding, 2 * time.Second, 0, accounting.ProviderState{RateLimited: true, HasTokens: true}, 0, time.Minute},
		// The slot the settlement lands in leaves after the block would
		// end: nothing can go that soon.
		{"shorter than a slot: none", sliding, 2 * time.Second, 0, retry(3 * time.Second), 10000, 0},
		{"retry-after 0: none", sliding, 2 * time.Second, 0, retry(0), 10000, 0},
		{"a fixed window that ends within the block", fixed(time.Minute), 50 * time.Second, time.Second, accounting.ProviderState{RateLimited: true}, 0, 9 * time.Second},
		{"a fixed window that ends after it: none", fixed(time.Hour), 50 * time.Second, time.Second, accounting.ProviderState{RateLimited: true}, 10000, 0},
		{"a fixed window that ends after the retry-after: none", fixed(time.Minute), 2 * time.Second, time.Second, retry(20 * time.Second), 10000, 0},
		{"a token bucket: none", bucket, 2 * time.Second, 0, accounting.ProviderState{RateLimited: true}, 10000, 0},
		{"a lifetime budget: none", lifetime, 2 * time.Second, 0, accounting.ProviderState{RateLimited: true}, 10000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{now: blockStart.Add(tt.at)}
			l, reg := clockedLimiterWithMetrics(t, c, tt.lim)
			store := l.Store()
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: onProvider, Estimate: accounting.Estimate{InputTokens: 1000}})
			if err != nil || !r.Admitted {
				t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
			}
			c.Advance(tt.elapsed)
			if ok, err := r.SettleProvider(t.Context(), accounting.Usage{}, tt.ps); !ok || err != nil {
				t.Fatalf("SettleProvider: %v %v", ok, err)
			}
			if got := leftOn(t, store, tt.lim, onProvider); got != tt.left {
				t.Errorf("right after the 429: %d left, want %d", got, tt.left)
			}
			wantBlocked := 0.0
			if tt.left < 10000 {
				wantBlocked = 1
			}
			if got := gathered(t, reg, "tokenwarden_provider_blocked_total", "limit", tt.lim.Name); got != wantBlocked {
				t.Errorf("blocked: got %v, want %v", got, wantBlocked)
			}
			if tt.free == 0 {
				return
			}
			// Still blocked a moment before the block ends (to a slot of
			// a sliding window), free when it does.
			c.Advance(tt.free - tt.lim.Window/accounting.SlidingSlots - time.Millisecond)
			if got := leftOn(t, store, tt.lim, onProvider); got != tt.left {
				t.Errorf("before the block ends: %d left, want %d", got, tt.left)
			}
			c.Advance(tt.lim.Window/accounting.SlidingSlots + time.Millisecond)
			if got := leftOn(t, store, tt.lim, onProvider); got != 10000 {
				t.Errorf("when the block ends: %d left, want 10000", got)
			}
		})
	}
}

// clockedLimiterWithMetrics is clockedLimiter with a registry of its own.
func clockedLimiterWithMetrics(t *testing.T, c *clock, limits ...accounting.Limit) (*accounting.Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	store := memstore.New(memstore.Options{Now: c.Now})
	l, err := accounting.New(accounting.Options{Store: store, Limits: limits, Now: c.Now, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeLimiter(t, l) })
	return l, reg
}

// TestProviderBlockBoundsOneCaller: whatever one principal sends — any
// number of requests, at any times, each taking any time, some of them
// refused by the provider with a 429 that states a retry-after or none —
// another principal is refused by a provider limit only while a block of
// one of those 429s is still within its bound: the provider's
// retry-after, at most MaxProviderBlock. The first principal's own usage
// is too small to fill the limit: a refusal can only be a block. Each
// schedule is random, from its seed, on a limit of a random algorithm and
// window; the blocks must also work, somewhere.
func TestProviderBlockBoundsOneCaller(t *testing.T) {
	const schedules = 300
	held := 0
	for seed := range uint64(schedules) {
		held += blockSchedule(t, seed)
		if t.Failed() {
			t.Fatalf("schedule %d failed (go test -run %s reruns it among the rest)", seed, t.Name())
		}
	}
	t.Logf("the other principal was refused %d times, within a block's bound", held)
	if held == 0 {
		t.Error("no 429 blocked the other principal in any schedule: the blocks do nothing")
	}
}

// blockSchedule runs one random schedule and returns how often the other
// principal was refused (within a block's bound).
func blockSchedule(t *testing.T, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 27))
	windows := []time.Duration{10 * time.Second, time.Minute, 90 * time.Second, 5 * time.Minute, time.Hour}
	lim := perMinute("provider-tpm", accounting.Tokens, 1_000_000)
	lim.Window = windows[rng.IntN(len(windows))]
	lim.Algorithm = []accounting.Algorithm{accounting.SlidingWindow, accounting.FixedWindow, accounting.TokenBucket}[rng.IntN(3)]
	c := &clock{now: blockStart.Add(time.Duration(rng.Int64N(int64(time.Hour))))}
	l, _ := clockedLimiter(t, c, lim)
	who := func(tenant string) accounting.Attributes {
		return accounting.Attributes{{Name: "tenant", Value: tenant}, {Name: "provider", Value: "p"}, {Name: "model", Value: "m"}}
	}
	small := accounting.Estimate{InputTokens: 10, OutputTokens: 10}

	// blockedUntil is when the latest block's bound ends, counted from
	// its settlement.
	var blockedUntil time.Time
	type inFlight struct {
		r  *accounting.Reservation
		at time.Time // when it settles
		ps accounting.ProviderState
	}
	var flying []inFlight
	refused := 0
	end := c.Now().Add(30 * time.Minute)
	for c.Now().Before(end) {
		switch op := rng.IntN(10); {
		case op < 4: // the first principal sends a request
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: who("a"), Estimate: small})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Admitted {
				continue
			}
			f := inFlight{r: r, at: c.Now().Add(time.Duration(rng.Int64N(int64(20 * time.Second))))}
			if rng.IntN(3) == 0 {
				f.ps.RateLimited = true
				if rng.IntN(3) > 0 {
					f.ps.RetryAfter, f.ps.HasRetryAfter = time.Duration(rng.Int64N(int64(3*time.Minute))), true
				}
			}
			flying = append(flying, f)
		case op < 7: // the other principal sends one
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: who("b"), Estimate: small})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Admitted {
				if !c.Now().Before(blockedUntil) {
					t.Errorf("seed %d, %s %s: at %s the other principal is refused (%s left, retry after %s), the last block's bound ended at %s",
						seed, lim.Algorithm, lim.Window, c.Now().Format(time.TimeOnly+".000000"), fmt.Sprint(r.Trip.Remaining),
						r.Trip.RetryAfter, blockedUntil.Format(time.TimeOnly+".000000"))
					return refused
				}
				refused++
				continue
			}
			if _, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 10, OutputTokens: 5}); err != nil {
				t.Fatal(err)
			}
		default: // time passes; what is due settles
			c.Advance(time.Duration(rng.Int64N(int64(10 * time.Second))))
			kept := flying[:0]
			for _, f := range flying {
				if c.Now().Before(f.at) {
					kept = append(kept, f)
					continue
				}
				usage := accounting.Usage{InputTokens: 10, OutputTokens: 5}
				if f.ps.RateLimited {
					usage = accounting.Usage{}
					bound := accounting.MaxProviderBlock
					if f.ps.HasRetryAfter {
						bound = min(f.ps.RetryAfter, bound)
					}
					if until := c.Now().Add(bound); until.After(blockedUntil) {
						blockedUntil = until
					}
				}
				if _, err := f.r.SettleProvider(t.Context(), usage, f.ps); err != nil {
					t.Fatal(err)
				}
			}
			flying = kept
		}
	}
	return refused
}
