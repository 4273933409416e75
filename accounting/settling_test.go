package accounting_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// daily is a fixed window of a day (a UTC day: windows are aligned to the
// Unix epoch) of n in dimension d per tenant.
func daily(name string, d accounting.Dimension, n int64) accounting.Limit {
	return accounting.Limit{Name: name, Dimension: d, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: n, Window: 24 * time.Hour}
}

// tokensRequest asks for n input tokens as tenant t1.
func tokensRequest(n int64) accounting.Request {
	return accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: n}}
}

// TestSettlingRefusal: a refusal whose shortfall reservations in flight
// hold (they would give it back by settling on less than they reserved)
// is Settling, with a retry of at most InFlightRetryAfter, not the
// limit's reset, which FreesAfter keeps; and once the request in flight
// settles on what it used, the request fits, as the retry promised it
// might. A shortfall larger than what is in flight, a requests limit
// (a request counts 1 whatever it used), and a refusal that another
// limit's reset decides are not.
func TestSettlingRefusal(t *testing.T) {
	lifetime := accounting.Limit{Name: "run-tokens", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.Lifetime, Limit: 1000, Window: time.Hour}
	perSecondTokens := accounting.Limit{Name: "tps", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1000, Window: time.Second}
	tests := []struct {
		name   string
		limits []accounting.Limit
		// spent is settled in full first; inFlight is then reserved and
		// left in flight; want is then asked.
		spent, inFlight, want int64
		settling              bool
		limit                 string
		retryAfter            time.Duration // at the start of the window
		freesAfter            time.Duration
		final                 bool
	}{
		{"held by a request in flight", []accounting.Limit{daily("daily-tokens", accounting.Tokens, 1000)}, 0, 800, 300,
			true, "daily-tokens", accounting.InFlightRetryAfter, 24 * time.Hour, false},
		{"more short than is in flight", []accounting.Limit{daily("daily-tokens", accounting.Tokens, 1000)}, 800, 100, 300,
			false, "daily-tokens", 24 * time.Hour, 24 * time.Hour, false},
		{"a limit that frees sooner on its own", []accounting.Limit{perSecondTokens}, 0, 800, 300,
			true, "tps", time.Second, time.Second, false},
		{"a run's budget", []accounting.Limit{lifetime}, 0, 800, 300,
			true, "run-tokens", accounting.InFlightRetryAfter, 0, false},
		{"a run's budget spent", []accounting.Limit{lifetime}, 800, 0, 300,
			false, "run-tokens", 0, 0, true},
		{"a requests limit", []accounting.Limit{daily("daily-requests", accounting.Requests, 1)}, 0, 800, 300,
			false, "daily-requests", 24 * time.Hour, 24 * time.Hour, false},
		{"another limit frees later", []accounting.Limit{daily("daily-tokens", accounting.Tokens, 1000), daily("daily-requests", accounting.Requests, 1)}, 0, 800, 300,
			false, "daily-requests", 24 * time.Hour, 24 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, memstore.New(memstore.Options{}), tt.limits...)
				ctx := t.Context()
				if tt.spent > 0 {
					r, err := l.Reserve(ctx, tokensRequest(tt.spent))
					if err != nil || !r.Admitted {
						t.Fatalf("spending %d: %v", tt.spent, err)
					}
					if _, err := r.Settle(ctx, accounting.Usage{InputTokens: tt.spent}); err != nil {
						t.Fatal(err)
					}
				}
				var held *accounting.Reservation
				if tt.inFlight > 0 {
					var err error
					if held, err = l.Reserve(ctx, tokensRequest(tt.inFlight)); err != nil || !held.Admitted {
						t.Fatalf("reserving %d: %v", tt.inFlight, err)
					}
				}
				r, err := l.Reserve(ctx, tokensRequest(tt.want))
				if err != nil || r.Admitted {
					t.Fatalf("got admitted=%v, err %v, want a refusal", r != nil && r.Admitted, err)
				}
				tr := r.Trip
				if tr.Limit.Name != tt.limit || tr.Settling != tt.settling || tr.RetryAfter != tt.retryAfter || tr.FreesAfter != tt.freesAfter || tr.Final != tt.final {
					t.Errorf("trip: got %s settling %v, retry after %v, frees after %v, final %v; want %s, %v, %v, %v, %v",
						tr.Limit.Name, tr.Settling, tr.RetryAfter, tr.FreesAfter, tr.Final, tt.limit, tt.settling, tt.retryAfter, tt.freesAfter, tt.final)
				}
				if tt.settling && tr.InFlight != tt.inFlight {
					t.Errorf("trip: in flight %d, want %d", tr.InFlight, tt.inFlight)
				}
				if tt.settling {
					if o := r.Outcome(); o != accounting.OutcomeRejected {
						t.Errorf("outcome %s, want rejected", o)
					}
					// The request in flight uses 100 of its 800: the
					// request now fits.
					if _, err := held.Settle(ctx, accounting.Usage{InputTokens: 100}); err != nil {
						t.Fatal(err)
					}
					if r, err := l.Reserve(ctx, tokensRequest(tt.want)); err != nil || !r.Admitted {
						t.Errorf("after the settlement: admitted=%v, err %v; want admitted", r != nil && r.Admitted, err)
					}
				}
			})
		})
	}
}

// TestSettlingWaits: a request whose limit may wait, refused for what a
// request in flight holds, waits for it to settle, asking the store again
// every InFlightPoll, and is admitted when the settlement leaves room;
// when the settlement uses all it held, the next attempt finds nothing in
// flight and the request is refused at once, with the limit's reset.
func TestSettlingWaits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		used  int64 // what the request in flight settles on
		admit bool
	}{
		{"the request in flight uses little", 100, true},
		{"the request in flight uses it all", 800, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := daily("daily-tokens", accounting.Tokens, 1000)
				lim.OnExhausted.WaitUpTo = 2 * time.Second
				l := waitLimiter(t, prometheus.NewRegistry(), accounting.Options{}, lim)
				ctx := t.Context()
				held, err := l.Reserve(ctx, tokensRequest(800))
				if err != nil || !held.Admitted {
					t.Fatalf("reserving 800: %v", err)
				}
				t0 := time.Now()
				done := make(chan *accounting.Reservation, 1)
				go func() {
					r, err := l.ReserveWaiting(ctx, tokensRequest(300), noHold)
					if err != nil {
						t.Error(err)
					}
					done <- r
				}()
				synctest.Wait()                                        // refused, and waiting
				time.Sleep(accounting.InFlightPoll + time.Millisecond) // past its first retry: still held
				if _, err := held.Settle(context.WithoutCancel(ctx), accounting.Usage{InputTokens: tt.used}); err != nil {
					t.Fatal(err)
				}
				r := <-done
				took := time.Since(t0)
				if tt.admit {
					if !r.Admitted || r.Wait.Outcome != accounting.WaitAdmitted || took != 2*accounting.InFlightPoll {
						t.Errorf("got admitted=%v (%+v) at %v, want admitted at the poll after the settlement, %v", r.Admitted, r.Wait, took, 2*accounting.InFlightPoll)
					}
					return
				}
				if r.Admitted || r.Wait.Outcome != accounting.WaitTimedOut || r.Trip.Settling || r.Trip.RetryAfter != 24*time.Hour-took {
					t.Errorf("got admitted=%v (%+v), settling %v, retry after %v at %v; want refused at the poll after the settlement, until the day's end",
						r.Admitted, r.Wait, r.Trip.Settling, r.Trip.RetryAfter, took)
				}
			})
		})
	}
}
