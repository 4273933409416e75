package accounting_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// The tests of waits run in a synctest bubble: the Limiter's timers and
// the memory store's clock are the bubble's, which moves only when every
// goroutine in it waits, so a wait of seconds takes none and every time
// is exact. The bubble starts at midnight, on a window boundary.

// perSecond is a fixed window of n requests a second per tenant that
// lets a refused request wait up to wait.
func perSecond(n int64, wait time.Duration) accounting.Limit {
	return accounting.Limit{Name: "rps", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Algorithm: accounting.FixedWindow, Limit: n, Window: time.Second, OnExhausted: accounting.OnExhausted{WaitUpTo: wait}}
}

// waitLimiter is a Limiter on a memory store in the current bubble, with
// its metrics in reg.
func waitLimiter(t *testing.T, reg prometheus.Registerer, opts accounting.Options, limits ...accounting.Limit) *accounting.Limiter {
	t.Helper()
	if opts.Store == nil {
		opts.Store = memstore.New(memstore.Options{})
	}
	opts.Limits, opts.Registerer = limits, reg
	l, err := accounting.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func noHold(time.Duration) error { return nil }

// result is what one ReserveWaiting returned, and when.
type result struct {
	r   *accounting.Reservation
	err error
	at  time.Duration // since the test began
}

// goWait starts ReserveWaiting for tenant in the bubble and returns where
// its result will arrive; it returns once the request has been refused
// and is waiting (or has returned), so requests started one after the
// other queue in that order.
func goWait(ctx context.Context, l *accounting.Limiter, tenant string, t0 time.Time) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := l.ReserveWaiting(ctx, accounting.Request{Attributes: accounting.Attributes{{Name: "tenant", Value: tenant}}}, noHold)
		ch <- result{r, err, time.Since(t0)}
	}()
	synctest.Wait()
	return ch
}

// TestWaitServesABurstInOrder: a burst of twice a window's capacity is
// all admitted: the first half at once, the second when the next window
// opens, in the order it arrived, and no window admits more than its
// capacity.
func TestWaitServesABurstInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		reg := prometheus.NewRegistry()
		l := waitLimiter(t, reg, accounting.Options{}, perSecond(n, 2*time.Second))
		t0 := time.Now()
		// Half a second into the window, so the wait is not a whole one.
		time.Sleep(500 * time.Millisecond)
		var results []<-chan result
		for range 2 * n {
			results = append(results, goWait(t.Context(), l, "t1", t0))
		}
		perWindow := map[time.Duration]int{}
		for i, ch := range results {
			res := <-ch
			if res.err != nil || !res.r.Admitted {
				t.Fatalf("request %d: admitted=%v err=%v, want admitted", i, res.r != nil && res.r.Admitted, res.err)
			}
			window := res.at.Truncate(time.Second)
			perWindow[window]++
			// Within a window the store counts down: the k-th admitted
			// has n-k left, which orders the admissions.
			wantRemaining := int64(n - 1 - i%n)
			if got := res.r.Dims[accounting.Requests].Remaining; got != wantRemaining {
				t.Errorf("request %d: remaining %d, want %d (admitted out of order)", i, got, wantRemaining)
			}
			wantAt, wantWait := 500*time.Millisecond, accounting.WaitOutcome("")
			if i >= n {
				wantAt, wantWait = time.Second, accounting.WaitAdmitted
			}
			if res.at != wantAt || res.r.Wait.Outcome != wantWait {
				t.Errorf("request %d: admitted at %v after a wait %q, want at %v after %q", i, res.at, res.r.Wait.Outcome, wantAt, wantWait)
			}
			if i >= n && res.r.Wait.Took != 500*time.Millisecond {
				t.Errorf("request %d: waited %v, want 500ms", i, res.r.Wait.Took)
			}
		}
		for w, count := range perWindow {
			if count > n {
				t.Errorf("window at %v admitted %d, more than its %d", w, count, n)
			}
		}
		if got := gathered(t, reg, "tokenwarden_waited_total", "outcome", "admitted"); got != n {
			t.Errorf("waited_total{admitted}: got %v, want %d", got, n)
		}
		if got := gathered(t, reg, "tokenwarden_wait_seconds"); got != n {
			t.Errorf("wait_seconds count: got %v, want %d", got, n)
		}
		if got := gathered(t, reg, "tokenwarden_rejections_total", "limit", "rps"); got != 0 {
			t.Errorf("rejections_total: got %v, want 0 (every request was admitted)", got)
		}
		if got := gathered(t, reg, "tokenwarden_waiting"); got != 0 {
			t.Errorf("waiting: got %v after the burst, want 0", got)
		}
	})
}

// TestWaitKeysDoNotDelayEachOther: a tenant whose line is long does not
// hold up another's, whose first waiter asks when its own retry time
// comes.
func TestWaitKeysDoNotDelayEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := waitLimiter(t, nil, accounting.Options{}, perSecond(1, 2*time.Second))
		t0 := time.Now()
		var a []<-chan result
		for range 3 {
			a = append(a, goWait(t.Context(), l, "a", t0))
		}
		b := []<-chan result{goWait(t.Context(), l, "b", t0), goWait(t.Context(), l, "b", t0)}
		// a: one now, one at 1s, one at 2s. b: one now, one at 1s.
		for i, want := range []time.Duration{0, time.Second, 2 * time.Second} {
			if res := <-a[i]; res.err != nil || !res.r.Admitted || res.at != want {
				t.Errorf("tenant a, request %d: admitted=%v at %v, want admitted at %v", i, res.r != nil && res.r.Admitted, res.at, want)
			}
		}
		for i, want := range []time.Duration{0, time.Second} {
			if res := <-b[i]; res.err != nil || !res.r.Admitted || res.at != want {
				t.Errorf("tenant b, request %d: admitted=%v at %v, want admitted at %v", i, res.r != nil && res.r.Admitted, res.at, want)
			}
		}
	})
}

// TestWaitGivesUp: a request refused when capacity will not return
// within its wait is refused, at once when the store says so up front,
// and otherwise as soon as a refusal says so.
func TestWaitGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		// One a second, a wait of 1.5s: the first waiter is admitted
		// when the next window opens; the second, behind it, is then
		// refused until the window after, past its wait, and gives up
		// then rather than at its deadline.
		l := waitLimiter(t, reg, accounting.Options{}, perSecond(1, 1500*time.Millisecond))
		t0 := time.Now()
		first := goWait(t.Context(), l, "t1", t0)
		second := goWait(t.Context(), l, "t1", t0)
		third := goWait(t.Context(), l, "t1", t0)
		if res := <-first; !res.r.Admitted || res.at != 0 {
			t.Fatalf("first: admitted=%v at %v, want admitted at once", res.r.Admitted, res.at)
		}
		if res := <-second; !res.r.Admitted || res.at != time.Second {
			t.Errorf("second: admitted=%v at %v, want admitted at 1s", res.r.Admitted, res.at)
		}
		res := <-third
		if res.err != nil || res.r.Admitted {
			t.Fatalf("third: admitted=%v err=%v, want refused", res.r != nil && res.r.Admitted, res.err)
		}
		if res.at != time.Second || res.r.Wait.Outcome != accounting.WaitTimedOut || res.r.Wait.Took != time.Second {
			t.Errorf("third: refused at %v, wait %+v; want at 1s, timed_out after 1s", res.at, res.r.Wait)
		}
		// Its Retry-After counts from the refusal it got, at 1s.
		if res.r.Trip.RetryAfter != time.Second {
			t.Errorf("third: retry-after %v, want 1s", res.r.Trip.RetryAfter)
		}
		if o := res.r.Outcome(); o != accounting.OutcomeRejected {
			t.Errorf("third: outcome %q, want rejected", o)
		}
		if got := gathered(t, reg, "tokenwarden_waited_total", "outcome", "timed_out"); got != 1 {
			t.Errorf("waited_total{timed_out}: got %v, want 1", got)
		}
		if got := gathered(t, reg, "tokenwarden_rejections_total", "limit", "rps"); got != 1 {
			t.Errorf("rejections_total: got %v, want 1 (one refusal reached a caller)", got)
		}
	})
}

// TestWaitOnlyWhenEveryRefusalWaits: a request is held only when every
// limit that refused it waits and frees within its wait; else it is
// refused at once, without a wait outcome.
func TestWaitOnlyWhenEveryRefusalWaits(t *testing.T) {
	noWait := perSecond(1, 0)
	noWait.Name = "no-wait"
	tooLong := perSecond(1, 2*time.Second)
	tooLong.Name, tooLong.Window = "minute", time.Minute
	big := perSecond(1, 2*time.Second)
	big.Name, big.Dimension = "tokens", accounting.Tokens
	// Frees in 4s, within its own wait; but a limit that also refuses
	// lets the request wait only 1s.
	slow := perSecond(1, 5*time.Second)
	slow.Name, slow.Window = "slow", 4*time.Second
	tests := []struct {
		name   string
		limits []accounting.Limit
		est    accounting.Estimate
	}{
		{"a limit without a wait also refuses", []accounting.Limit{perSecond(1, 2*time.Second), noWait}, accounting.Estimate{}},
		{"the shortest wait is too short for the last to free", []accounting.Limit{slow, perSecond(1, time.Second)}, accounting.Estimate{}},
		{"capacity returns after the wait", []accounting.Limit{tooLong}, accounting.Estimate{}},
		{"never fits", []accounting.Limit{big}, accounting.Estimate{InputTokens: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := waitLimiter(t, nil, accounting.Options{}, tt.limits...)
				req := accounting.Request{Attributes: tenant, Estimate: tt.est}
				if tt.name != "never fits" {
					if r, err := l.Reserve(t.Context(), req); err != nil || !r.Admitted {
						t.Fatalf("first: admitted=%v err=%v", r != nil && r.Admitted, err)
					}
				}
				held := false
				start := time.Now()
				r, err := l.ReserveWaiting(t.Context(), req, func(time.Duration) error { held = true; return nil })
				if err != nil || r.Admitted {
					t.Fatalf("admitted=%v err=%v, want refused", r != nil && r.Admitted, err)
				}
				if held || time.Since(start) != 0 || r.Wait.Outcome != "" {
					t.Errorf("held=%v for %v with outcome %q, want refused at once", held, time.Since(start), r.Wait.Outcome)
				}
			})
		})
	}
}

// TestWaitCancelled: a waiter whose caller goes away leaves its line at
// once, reserves nothing, and the one behind it moves up.
func TestWaitCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		l := waitLimiter(t, reg, accounting.Options{}, perSecond(1, 2*time.Second))
		t0 := time.Now()
		<-goWait(t.Context(), l, "t1", t0) // takes the window
		headCtx, cancelHead := context.WithCancel(t.Context())
		head := goWait(headCtx, l, "t1", t0)
		middleCtx, cancelMiddle := context.WithCancel(t.Context())
		middle := goWait(middleCtx, l, "t1", t0)
		last := goWait(t.Context(), l, "t1", t0)
		if got := gathered(t, reg, "tokenwarden_waiting"); got != 3 {
			t.Fatalf("waiting: got %v, want 3", got)
		}
		time.Sleep(100 * time.Millisecond)
		// The middle one leaves while the head still waits: it is not
		// its turn yet, and it goes at once all the same.
		cancelMiddle()
		synctest.Wait()
		if len(middle) == 0 {
			t.Fatal("a waiter whose turn had not come stayed after its caller left")
		}
		cancelHead()
		for name, ch := range map[string]<-chan result{"head": head, "middle": middle} {
			res := <-ch
			if res.err != nil || res.r.Admitted || res.r.Wait.Outcome != accounting.WaitCancelled || res.at != 100*time.Millisecond {
				t.Errorf("%s: admitted=%v err=%v wait=%+v at %v; want a cancelled wait that ends at once (100ms)",
					name, res.r != nil && res.r.Admitted, res.err, res.r.Wait, res.at)
			}
			if o := res.r.Outcome(); o != accounting.OutcomeCancelled {
				t.Errorf("%s: outcome %q, want cancelled", name, o)
			}
		}
		// The last waiter takes the next window, which the cancelled
		// ones did not reserve: it has the whole of it.
		res := <-last
		if !res.r.Admitted || res.at != time.Second || res.r.Dims[accounting.Requests].Remaining != 0 {
			t.Errorf("last: admitted=%v at %v remaining %d, want admitted at 1s with 0 left", res.r.Admitted, res.at, res.r.Dims[accounting.Requests].Remaining)
		}
		if r, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant}); r.Admitted {
			t.Error("the window admitted a second request: a cancelled waiter's place was kept")
		}
		if got := gathered(t, reg, "tokenwarden_waited_total", "outcome", "cancelled"); got != 2 {
			t.Errorf("waited_total{cancelled}: got %v, want 2", got)
		}
		if got := gathered(t, reg, "tokenwarden_rejections_total", "limit", "rps"); got != 1 {
			t.Errorf("rejections_total: got %v, want 1 (the direct Reserve only; no one heard the cancelled ones)", got)
		}
	})
}

// TestWaitHoldFails: a caller that cannot hold the request (hold fails)
// ends the wait as cancelled, before asking the store again.
func TestWaitHoldFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := waitLimiter(t, nil, accounting.Options{}, perSecond(1, 2*time.Second))
		req := accounting.Request{Attributes: tenant}
		l.Reserve(t.Context(), req)
		var upTo time.Duration
		r, err := l.ReserveWaiting(t.Context(), req, func(d time.Duration) error { upTo = d; return errors.New("stream gone") })
		if err != nil || r.Admitted || r.Wait.Outcome != accounting.WaitCancelled {
			t.Errorf("admitted=%v err=%v wait %q, want cancelled", r != nil && r.Admitted, err, r.Wait.Outcome)
		}
		if upTo != 2*time.Second {
			t.Errorf("hold asked for %v, want the limit's wait, 2s", upTo)
		}
	})
}

// TestWaitQueueFull: over a line's bound, or the bound in all, a request
// is refused at once.
func TestWaitQueueFull(t *testing.T) {
	for _, opts := range []accounting.Options{{MaxWaitingPerKey: 2}, {MaxWaiting: 2}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				l := waitLimiter(t, reg, opts, perSecond(1, 2*time.Second))
				t0 := time.Now()
				<-goWait(t.Context(), l, "t1", t0)
				a, b := goWait(t.Context(), l, "t1", t0), goWait(t.Context(), l, "t1", t0)
				res := <-goWait(t.Context(), l, "t1", t0)
				if res.r.Admitted || res.r.Wait.Outcome != accounting.WaitQueueFull || res.at != 0 {
					t.Errorf("third waiter: admitted=%v wait %+v at %v, want refused at once, queue_full", res.r.Admitted, res.r.Wait, res.at)
				}
				if got := gathered(t, reg, "tokenwarden_waited_total", "outcome", "queue_full"); got != 1 {
					t.Errorf("waited_total{queue_full}: got %v, want 1", got)
				}
				if r := (<-a).r; !r.Admitted {
					t.Error("first waiter refused")
				}
				<-b
			})
		})
	}
}

// failingAfter fails every Reserve after the first n.
type failingAfter struct {
	accounting.Store
	mu sync.Mutex
	n  int
}

func (s *failingAfter) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	s.mu.Lock()
	s.n--
	fail := s.n < 0
	s.mu.Unlock()
	if fail {
		return accounting.ReserveResult{}, fmt.Errorf("%w: down (%w)", accounting.ErrStoreUnavailable, accounting.ErrNotApplied)
	}
	return s.Store.Reserve(ctx, req)
}

// TestWaitStoreFails: a store that fails while a request waits is the
// limit's on_store_error, as on a first attempt: deny returns the error,
// allow admits unreserved.
func TestWaitStoreFails(t *testing.T) {
	for _, mode := range []accounting.FailMode{accounting.FailClosed, accounting.FailOpen} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				lim := perSecond(1, 2*time.Second)
				lim.OnStoreError = mode
				// Two answers: the first request's, and the waiter's refusal.
				store := &failingAfter{Store: memstore.New(memstore.Options{}), n: 2}
				l := waitLimiter(t, reg, accounting.Options{Store: store}, lim)
				t0 := time.Now()
				<-goWait(t.Context(), l, "t1", t0)
				res := <-goWait(t.Context(), l, "t1", t0)
				switch mode {
				case accounting.FailClosed:
					if !errors.Is(res.err, accounting.ErrStoreUnavailable) || res.at != time.Second {
						t.Errorf("got %v at %v, want ErrStoreUnavailable at 1s", res.err, res.at)
					}
					if got := gathered(t, reg, "tokenwarden_waited_total", "outcome", "unavailable"); got != 1 {
						t.Errorf("waited_total{unavailable}: got %v, want 1", got)
					}
				case accounting.FailOpen:
					if res.err != nil || !res.r.Admitted || !res.r.FailedOpen {
						t.Errorf("admitted=%v failed open=%v err=%v, want admitted unreserved", res.r != nil && res.r.Admitted, res.r != nil && res.r.FailedOpen, res.err)
					}
				}
			})
		})
	}
}

func TestWaitUpToIsValidated(t *testing.T) {
	lifetime := accounting.Limit{Name: "run", Dimension: accounting.Requests, Scope: []string{"run"},
		Algorithm: accounting.Lifetime, Limit: 3, Window: time.Hour, OnExhausted: accounting.OnExhausted{WaitUpTo: time.Second}}
	concurrent := accounting.Limit{Name: "inflight", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
		Limit: 3, Window: time.Minute, OnExhausted: accounting.OnExhausted{WaitUpTo: time.Second}}
	shadowWait := perSecond(1, time.Second)
	shadowWait.Mode = accounting.Shadow
	tests := []struct {
		name string
		l    accounting.Limit
		want string // "" for valid
	}{
		{"none", perSecond(1, 0), ""},
		{"the longest", perSecond(1, accounting.MaxWaitUpTo), ""},
		{"too long", perSecond(1, accounting.MaxWaitUpTo+time.Millisecond), "on_exhausted.wait_up_to: 10.001s is above the longest wait, 10s"},
		{"negative", perSecond(1, -time.Second), "on_exhausted.wait_up_to: must not be negative"},
		{"lifetime", lifetime, "on_exhausted.wait_up_to: a lifetime budget never frees"},
		{"concurrent", concurrent, "on_exhausted.wait_up_to: a concurrent limit cannot say when a slot frees"},
		{"shadow", shadowWait, "on_exhausted.wait_up_to: a shadow limit refuses nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tt.want != "" && (err == nil || !contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestWaitLinesOutliveAReload: a Limiter reconfigured while requests
// wait shares their lines: its own waiters queue behind them.
func TestWaitLinesOutliveAReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := waitLimiter(t, nil, accounting.Options{}, perSecond(1, 3*time.Second))
		t0 := time.Now()
		<-goWait(t.Context(), l, "t1", t0)
		before := goWait(t.Context(), l, "t1", t0)
		next, err := l.Reconfigure(accounting.Options{Limits: []accounting.Limit{perSecond(1, 3*time.Second)}})
		if err != nil {
			t.Fatal(err)
		}
		after := goWait(t.Context(), next, "t1", t0)
		if res := <-before; !res.r.Admitted || res.at != time.Second {
			t.Errorf("waiter of the first config: admitted=%v at %v, want at 1s", res.r.Admitted, res.at)
		}
		if res := <-after; !res.r.Admitted || res.at != 2*time.Second {
			t.Errorf("waiter of the reloaded config: admitted=%v at %v, want at 2s, behind the other", res.r.Admitted, res.at)
		}
		if _, err := l.Reconfigure(accounting.Options{MaxWaiting: 7}); err == nil {
			t.Error("Reconfigure changed MaxWaiting")
		}
	})
}

// TestWaitIgnoresShadowLimits: a shadow limit that would also refuse
// (and never waits) does not keep a request from waiting for the limit
// that does refuse it.
func TestWaitIgnoresShadowLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shadow := perSecond(1, 0)
		shadow.Name, shadow.Mode, shadow.Window = "would-refuse", accounting.Shadow, time.Hour
		l := waitLimiter(t, nil, accounting.Options{}, perSecond(1, 2*time.Second), shadow)
		t0 := time.Now()
		<-goWait(t.Context(), l, "t1", t0)
		if res := <-goWait(t.Context(), l, "t1", t0); !res.r.Admitted || res.r.Wait.Outcome != accounting.WaitAdmitted || res.at != time.Second {
			t.Errorf("admitted=%v wait %+v at %v, want admitted after a wait, at 1s", res.r.Admitted, res.r.Wait, res.at)
		}
	})
}
