package accounting_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// sharedTPM is 1000 tokens an hour shared by every caller, 30% of it
// kept for requests whose priority is interactive.
func sharedTPM(alg accounting.Algorithm) accounting.Limit {
	return accounting.Limit{Name: "shared-tpm", Dimension: accounting.Tokens, Algorithm: alg, Limit: 1000, Window: time.Hour,
		ReserveFor: &accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.3}}
}

func tierRequest(priority string, tokens int64) accounting.Request {
	var attrs accounting.Attributes
	if priority != "" {
		attrs = accounting.Attributes{{Name: "priority", Value: priority}}
	}
	return accounting.Request{Attributes: attrs, Estimate: accounting.Estimate{InputTokens: tokens}}
}

func TestReserveForReserved(t *testing.T) {
	tests := []struct {
		name  string
		share float64
		value int64
		want  int64
	}{
		{"exact", 0.3, 1000, 300},
		{"exact where the float is not", 0.3, 10, 3},
		{"rounded up", 0.3, 7, 3},
		{"a sliver of one", 0.01, 1, 1},
		{"large", 0.25, 1e15, 25e13},
		{"nothing", 0.5, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := accounting.ReserveFor{Attribute: "p", Value: "v", Share: tt.share}
			if got := r.Reserved(tt.value); got != tt.want {
				t.Errorf("Reserved(%d) with share %v: got %d, want %d", tt.value, tt.share, got, tt.want)
			}
		})
	}
}

func TestReserveForValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(l *accounting.Limit)
		field string // "" means valid
	}{
		{"valid", func(*accounting.Limit) {}, ""},
		{"no attribute", func(l *accounting.Limit) { l.ReserveFor.Attribute = "" }, "reserve_for.attribute"},
		{"no value", func(l *accounting.Limit) { l.ReserveFor.Value = "" }, "reserve_for.value"},
		{"zero share", func(l *accounting.Limit) { l.ReserveFor.Share = 0 }, "reserve_for.share"},
		{"whole share", func(l *accounting.Limit) { l.ReserveFor.Share = 1 }, "reserve_for.share"},
		{"negative share", func(l *accounting.Limit) { l.ReserveFor.Share = -0.2 }, "reserve_for.share"},
		{"share below a millionth", func(l *accounting.Limit) { l.ReserveFor.Share = 1e-9 }, "reserve_for.share"},
		{"nothing left", func(l *accounting.Limit) { l.Limit = 1 }, "reserve_for.share"},
		{"token bucket", func(l *accounting.Limit) { l.Algorithm = accounting.TokenBucket }, "reserve_for"},
		{"concurrent", func(l *accounting.Limit) {
			l.Dimension, l.Algorithm, l.Limit, l.Window = accounting.Concurrent, accounting.Leases, 10, time.Minute
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := sharedTPM(accounting.SlidingWindow)
			tt.edit(&l)
			err := l.Validate()
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.field != "" && (err == nil || !strings.Contains(err.Error(), tt.field+":")):
				t.Errorf("got %v, want an error on %s", err, tt.field)
			}
		})
	}
}

// TestReserveForHoldsBack: a request outside the tier is refused once
// the counter reaches 70%, and counted as held back; an interactive one
// is still admitted up to the whole limit, and the 429 states the limit
// each was held to.
func TestReserveForHoldsBack(t *testing.T) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			l, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}),
				Limits: []accounting.Limit{sharedTPM(alg)}, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				priority string
				tokens   int64
				admitted bool
				limit    int64 // the limit the decision states
			}{
				{"batch", 600, true, 700},
				{"batch", 100, true, 700},
				{"batch", 1, false, 700},
				{"", 1, false, 700},
				{"interactive", 250, true, 1000},
				{"interactive", 50, true, 1000},
				{"interactive", 1, false, 1000},
			}
			for i, s := range steps {
				res, err := l.Reserve(context.Background(), tierRequest(s.priority, s.tokens))
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if res.Admitted != s.admitted {
					t.Fatalf("step %d (%s %d): admitted %v, want %v", i, s.priority, s.tokens, res.Admitted, s.admitted)
				}
				if got := res.Dims[accounting.Tokens].Limit; got != s.limit {
					t.Errorf("step %d: limit stated %d, want %d", i, got, s.limit)
				}
			}
			if got := gathered(t, reg, "tokenwarden_reserve_held_total", "limit", "shared-tpm"); got != 2 {
				t.Errorf("held back: got %v, want 2 (the two batch refusals with room in the whole limit)", got)
			}
		})
	}
}

// TestReserveForWithLimitFrom: the share applies to the request's value
// of a limit_from limit.
func TestReserveForWithLimitFrom(t *testing.T) {
	lim := sharedTPM(accounting.FixedWindow)
	lim.Scope = []string{"tenant"}
	lim.From = &accounting.LimitFrom{Attribute: "tpm", Ceiling: 10000}
	l, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}), Limits: []accounting.Limit{lim}})
	if err != nil {
		t.Fatal(err)
	}
	req := tierRequest("batch", 1400)
	req.Attributes = append(req.Attributes, accounting.Attribute{Name: "tenant", Value: "t"}, accounting.Attribute{Name: "tpm", Value: "2000"})
	res, err := l.Reserve(context.Background(), req)
	if err != nil || !res.Admitted {
		t.Fatalf("1400 of 70%% of 2000: admitted %v, err %v; want admitted", res != nil && res.Admitted, err)
	}
	if got := res.Dims[accounting.Tokens].Limit; got != 1400 {
		t.Errorf("limit stated: got %d, want 1400", got)
	}
}

// TestReserveForUnderContention: batch and interactive requests race for
// one counter. However they interleave, batch never holds more than 70%
// of it, and interactive requests asking for 30% in all are all
// admitted.
func TestReserveForUnderContention(t *testing.T) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			l, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}),
				Limits: []accounting.Limit{sharedTPM(alg)}})
			if err != nil {
				t.Fatal(err)
			}
			var batch, interactive, interactiveRefused atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 8 {
				wg.Go(func() {
					<-start
					// Far more than the limit: batch keeps asking.
					for range 200 {
						res, err := l.Reserve(context.Background(), tierRequest("batch", 7))
						if err != nil {
							t.Error(err)
							return
						}
						if res.Admitted {
							batch.Add(7)
						}
					}
				})
			}
			for range 6 {
				wg.Go(func() {
					<-start
					// 6 × 10 × 5 = 300: the tier's share exactly.
					for range 10 {
						res, err := l.Reserve(context.Background(), tierRequest("interactive", 5))
						if err != nil {
							t.Error(err)
							return
						}
						if res.Admitted {
							interactive.Add(5)
						} else {
							interactiveRefused.Add(1)
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if got := batch.Load(); got > 700 {
				t.Errorf("batch admitted %d tokens, want at most 700", got)
			}
			if got := interactive.Load(); got != 300 || interactiveRefused.Load() != 0 {
				t.Errorf("interactive admitted %d tokens with %d refusals, want 300 with none", got, interactiveRefused.Load())
			}
			// Batch did take what it could: the counter is not left
			// idle below its share.
			if got := batch.Load(); got < 700-300-7 {
				t.Errorf("batch admitted %d tokens, want at least %d", got, 700-300-7)
			}
		})
	}
}

// TestReserveForConcurrent: a concurrent limit of 10 with a share of 0.3
// admits other requests while fewer than 7 are in flight in all, and
// keeps the last 3 slots for the tier: a batch slot given back while the
// tier holds its 3 does not let batch in again.
func TestReserveForConcurrent(t *testing.T) {
	lim := accounting.Limit{Name: "slots", Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Limit: 10, Window: time.Minute,
		ReserveFor: &accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.3}}
	l, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}), Limits: []accounting.Limit{lim}})
	if err != nil {
		t.Fatal(err)
	}
	var held []*accounting.Reservation
	take := func(priority string) bool {
		res, err := l.Reserve(context.Background(), tierRequest(priority, 1))
		if err != nil {
			t.Fatal(err)
		}
		if res.Admitted {
			held = append(held, res)
		}
		return res.Admitted
	}
	for i := range 7 {
		if !take("batch") {
			t.Fatalf("batch slot %d refused, want 7 admitted", i+1)
		}
	}
	if take("batch") {
		t.Fatal("an eighth batch request admitted, want the last 3 slots kept")
	}
	for i := range 3 {
		if !take("interactive") {
			t.Fatalf("interactive slot %d refused, want 3 admitted", i+1)
		}
	}
	if take("interactive") {
		t.Fatal("an eleventh request admitted on 10 slots")
	}
	if _, err := held[0].Settle(context.Background(), accounting.Usage{}); err != nil {
		t.Fatal(err)
	}
	if take("batch") {
		t.Error("batch admitted with 9 requests in flight, want refused: other requests are held to 7 in all")
	}
}
