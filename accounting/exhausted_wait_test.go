package accounting_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The tests of a limit that both waits and downgrades (on_exhausted:
// {wait_up_to, downgrade_to}) run in a synctest bubble, as the tests of
// waits do (see wait_test.go).

// waitThenDowngrade is one request per second per tenant on gpt-4o,
// fixed windows, that waits up to wait and then downgrades to
// gpt-4o-mini, whose own limit of mini requests a second also waits.
func waitThenDowngrade(wait time.Duration, mini int64) []accounting.Limit {
	fourO := perSecond(1, wait)
	fourO.Name = "4o-rps"
	fourO.Match = map[string]string{"model": "gpt-4o"}
	fourO.OnExhausted.DowngradeTo = "gpt-4o-mini"
	miniRPS := perSecond(mini, wait)
	miniRPS.Name = "mini-rps"
	miniRPS.Match = map[string]string{"model": "gpt-4o-mini"}
	return []accounting.Limit{fourO, miniRPS}
}

// goDowngrade starts ReserveWaitingOrDowngrade of a gpt-4o request in the
// bubble, as goWait starts ReserveWaiting: it returns once the request
// is decided or waiting.
func goDowngrade(ctx context.Context, l *accounting.Limiter, t0 time.Time) <-chan downgradeResult {
	ch := make(chan downgradeResult, 1)
	go func() {
		res, refused, err := l.ReserveWaitingOrDowngrade(ctx, modelRequest("gpt-4o"), noHold, func(string) bool { return true })
		ch <- downgradeResult{res, refused, err, time.Since(t0)}
	}()
	synctest.Wait()
	return ch
}

type downgradeResult struct {
	res, refused *accounting.Reservation
	err          error
	at           time.Duration // since the test began
}

// TestWaitThenDowngrade: a burst on a limit that both waits and
// downgrades. The request capacity returns to within the wait keeps the
// model it asked for; the one it cannot return to in time is downgraded
// when the wait gives up, not refused, and the fallback does not make it
// wait again. Each request counts once: no rejection, one downgrade.
func TestWaitThenDowngrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		l := waitLimiter(t, reg, accounting.Options{}, waitThenDowngrade(1500*time.Millisecond, 5)...)
		t0 := time.Now()
		first, second, third := goDowngrade(t.Context(), l, t0), goDowngrade(t.Context(), l, t0), goDowngrade(t.Context(), l, t0)

		tests := []struct {
			name      string
			ch        <-chan downgradeResult
			wantModel string
			wantAt    time.Duration
			wantWait  accounting.WaitOutcome
			wantFrom  string // the limit that refused the model named; "" when not downgraded
		}{
			{"admitted at once", first, "gpt-4o", 0, "", ""},
			// The next window opens at 1s, within its wait.
			{"admitted after its wait", second, "gpt-4o", time.Second, accounting.WaitAdmitted, ""},
			// At 1s it heads the queue, is refused until 2s, past its
			// 1.5s: it gives up then and is downgraded at once.
			{"downgraded when its wait gives up", third, "gpt-4o-mini", time.Second, accounting.WaitTimedOut, "4o-rps"},
		}
		for _, tt := range tests {
			got := <-tt.ch
			if got.err != nil || !got.res.Admitted {
				t.Fatalf("%s: admitted=%v err=%v, want admitted", tt.name, got.res != nil && got.res.Admitted, got.err)
			}
			if got.res.Model != tt.wantModel {
				t.Errorf("%s: model %q, want %q", tt.name, got.res.Model, tt.wantModel)
			}
			if got.at != tt.wantAt {
				t.Errorf("%s: decided at %v, want %v", tt.name, got.at, tt.wantAt)
			}
			if got.res.Wait.Outcome != tt.wantWait {
				t.Errorf("%s: wait %q, want %q", tt.name, got.res.Wait.Outcome, tt.wantWait)
			}
			from := ""
			if got.refused != nil {
				from = got.refused.Trip.Limit.Name
				if got.refused.Model != "gpt-4o" {
					t.Errorf("%s: the refusal's model %q, want gpt-4o", tt.name, got.refused.Model)
				}
			}
			if from != tt.wantFrom {
				t.Errorf("%s: downgraded from limit %q, want %q", tt.name, from, tt.wantFrom)
			}
		}
		for _, c := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"tokenwarden_rejections_total", nil, 0},
			{"tokenwarden_downgrades_total", []string{"limit", "4o-rps"}, 1},
			{"tokenwarden_waited_total", []string{"outcome", "admitted"}, 1},
			{"tokenwarden_waited_total", []string{"outcome", "timed_out"}, 1},
		} {
			if got := gathered(t, reg, c.name, c.labels...); got != c.want {
				t.Errorf("%s%v: got %v, want %v", c.name, c.labels, got, c.want)
			}
		}
	})
}

// TestWaitThenDowngradeRefusals: the requests a limit that waits and
// downgrades does not downgrade, and how each is counted.
func TestWaitThenDowngradeRefusals(t *testing.T) {
	tests := []struct {
		name string
		// miniSpent: the fallback's limit, one request in a 2s window
		// that waits too, is spent before the burst; opts are the
		// Limiter's.
		miniSpent bool
		opts      accounting.Options
		// cancel: the client leaves while the request waits.
		cancel bool
		// want: the outcome of the third request of a burst of three
		// (the first takes the second, the second waits for it).
		want           accounting.Outcome
		wantWait       accounting.WaitOutcome
		wantAt         time.Duration
		wantRejections float64 // tokenwarden_rejections_total{limit="4o-rps"}
		wantMini       float64 // tokenwarden_rejections_total{limit="mini-rps"}: the fallback's refusals reach no client
		wantDowngrades float64
	}{
		// The fallback's own limit is spent until 2s, and it waits too
		// (up to 1.5s, which 2s is within from 1s): the request is not
		// held again, but refused when its first wait gives up, with the
		// 429 of the model it named, counted once.
		{name: "the fallback is full", miniSpent: true, want: accounting.OutcomeRejected, wantWait: accounting.WaitTimedOut,
			wantAt: time.Second, wantRejections: 1},
		// One waiter per key: the third finds the queue full and is
		// downgraded at once, with no wait.
		{name: "the queue is full", opts: accounting.Options{MaxWaitingPerKey: 1},
			want: accounting.OutcomeDowngraded, wantWait: accounting.WaitQueueFull, wantDowngrades: 1},
		// A client that leaves is neither served nor downgraded, and
		// counted as no rejection.
		{name: "the client leaves", cancel: true, want: accounting.OutcomeCancelled, wantWait: accounting.WaitCancelled,
			wantAt: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				lims := waitThenDowngrade(1500*time.Millisecond, 5)
				if tt.miniSpent {
					lims[1].Limit, lims[1].Window = 1, 2*time.Second
				}
				l := waitLimiter(t, reg, tt.opts, lims...)
				if tt.miniSpent {
					if r, err := l.Reserve(t.Context(), modelRequest("gpt-4o-mini")); err != nil || !r.Admitted {
						t.Fatalf("spending gpt-4o-mini: admitted=%v err=%v", r != nil && r.Admitted, err)
					}
				}
				t0 := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				goDowngrade(t.Context(), l, t0)
				second := goDowngrade(t.Context(), l, t0)
				third := goDowngrade(ctx, l, t0)
				if tt.cancel {
					time.Sleep(500 * time.Millisecond) // the bubble's clock: no real time passes
					cancel()
				}
				got := <-third
				if got.err != nil {
					t.Fatal(got.err)
				}
				outcome := got.res.Outcome()
				if got.refused != nil && got.res.Admitted {
					outcome = accounting.OutcomeDowngraded
				}
				if outcome != tt.want {
					t.Errorf("outcome %q, want %q", outcome, tt.want)
				}
				if got.res.Wait.Outcome != tt.wantWait {
					t.Errorf("wait %q, want %q", got.res.Wait.Outcome, tt.wantWait)
				}
				if got.at != tt.wantAt {
					t.Errorf("decided at %v, want %v", got.at, tt.wantAt)
				}
				if !got.res.Admitted && got.res.Model != "gpt-4o" {
					t.Errorf("refused as model %q, want gpt-4o (the model the client named)", got.res.Model)
				}
				<-second
				for _, c := range []struct {
					labels []string
					want   float64
				}{
					{[]string{"limit", "4o-rps"}, tt.wantRejections},
					{[]string{"limit", "mini-rps"}, tt.wantMini},
				} {
					if got := gathered(t, reg, "tokenwarden_rejections_total", c.labels...); got != c.want {
						t.Errorf("tokenwarden_rejections_total%v: got %v, want %v", c.labels, got, c.want)
					}
				}
				if got := gathered(t, reg, "tokenwarden_downgrades_total", "limit", "4o-rps"); got != tt.wantDowngrades {
					t.Errorf("tokenwarden_downgrades_total: got %v, want %v", got, tt.wantDowngrades)
				}
			})
		})
	}
}
