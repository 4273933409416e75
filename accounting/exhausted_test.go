package accounting_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// downgrading is a requests limit of n on model from, per tenant, that
// downgrades to model to.
func downgrading(name, from, to string, n int64) accounting.Limit {
	l := limit(name, accounting.Requests, n, "tenant")
	l.Match = map[string]string{"model": from}
	l.OnExhausted.DowngradeTo = to
	return l
}

func TestValidateDowngrades(t *testing.T) {
	tests := []struct {
		name   string
		limits []accounting.Limit
		want   string // the joined errors, "" for none
	}{
		{"one step", []accounting.Limit{downgrading("a", "gpt-4o", "gpt-4o-mini", 1)}, ""},
		{"a chain of three", []accounting.Limit{
			downgrading("a", "o3", "gpt-4o", 1), downgrading("b", "gpt-4o", "gpt-4o-mini", 1), downgrading("c", "gpt-4o-mini", "gpt-4.1-nano", 1),
		}, ""},
		{"two limits on one model, to two fallbacks", []accounting.Limit{
			downgrading("a", "gpt-4o", "gpt-4o-mini", 1), downgrading("b", "gpt-4o", "gpt-4.1-mini", 1),
		}, ""},
		{"no match.model", []accounting.Limit{func() accounting.Limit {
			l := limit("a", accounting.Requests, 1, "tenant")
			l.OnExhausted.DowngradeTo = "gpt-4o-mini"
			return l
		}()}, "limits[0].on_exhausted.downgrade_to: needs match.model, the model the limit downgrades from: a limit on every model would refuse the fallback too"},
		{"its own family", []accounting.Limit{downgrading("a", "gpt-4o", "gpt-4o-2024-08-06", 1)},
			`limits[0].on_exhausted.downgrade_to: "gpt-4o-2024-08-06" is of the family of match.model "gpt-4o": a downgrade goes to another model`},
		{"a quote in the name", []accounting.Limit{downgrading("a", "gpt-4o", `mini"`, 1)},
			`limits[0].on_exhausted.downgrade_to: "mini\"" must be 1-256 printable ASCII characters without spaces, quotes, '\\', '?', '#' or '%'`},
		{"a cycle of two", []accounting.Limit{
			downgrading("a", "gpt-4o", "gpt-4o-mini", 1), downgrading("b", "gpt-4o-mini", "gpt-4o-2024-08-06", 1),
		}, "limits[0].on_exhausted.downgrade_to: gpt-4o -> gpt-4o-mini -> gpt-4o is a cycle\n" +
			"limits[1].on_exhausted.downgrade_to: gpt-4o-mini -> gpt-4o -> gpt-4o-mini is a cycle"},
		{"a chain of four", []accounting.Limit{
			downgrading("a", "o3", "gpt-4o", 1), downgrading("b", "gpt-4o", "gpt-4o-mini", 1),
			downgrading("c", "gpt-4o-mini", "gpt-4.1-nano", 1), downgrading("d", "gpt-4.1-nano", "gpt-3.5-turbo", 1),
		}, "limits[0].on_exhausted.downgrade_to: o3 -> gpt-4o -> gpt-4o-mini -> gpt-4.1-nano -> gpt-3.5-turbo is longer than 3 downgrades"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&accounting.Options{Limits: tt.limits}).Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			fields(t, err) // each names its field
		})
	}
}

// downgradeLimits: gpt-4o admits one request per tenant, then sends the
// tenant to gpt-4o-mini, which admits one and sends it on to
// gpt-4.1-nano, which has no limit of its own but the per-model token
// budget that every model has.
func downgradeLimits() []accounting.Limit {
	return []accounting.Limit{
		downgrading("4o-requests", "gpt-4o", "gpt-4o-mini", 1),
		downgrading("mini-requests", "gpt-4o-mini", "gpt-4.1-nano", 1),
		limit("tokens-per-model", accounting.Tokens, 1_000_000, "tenant", "model"),
	}
}

func modelRequest(model string) accounting.Request {
	return accounting.Request{
		Attributes: accounting.Attributes{{Name: "tenant", Value: "t1"}, {Name: "model", Value: accounting.ModelFamily(model)}},
		Model:      model, Estimate: accounting.Estimate{InputTokens: 100, OutputTokens: 50},
	}
}

func TestReserveOrDowngrade(t *testing.T) {
	store := memstore.New(memstore.Options{})
	l := newLimiter(t, store, downgradeLimits()...)
	all := func(string) bool { return true }
	steps := []struct {
		wantModel   string // the reservation's model; "" for a refusal
		wantRefused string // the limit that set off the downgrade
	}{
		{"gpt-4o-2024-08-06", ""},
		{"gpt-4o-mini", "4o-requests"},
		{"gpt-4.1-nano", "4o-requests"},
		{"gpt-4.1-nano", "4o-requests"},
	}
	for i, step := range steps {
		res, refused, err := l.ReserveOrDowngrade(t.Context(), modelRequest("gpt-4o-2024-08-06"), all)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !res.Admitted || res.Model != step.wantModel {
			t.Fatalf("request %d: got admitted %v on %q, want admitted on %q", i, res.Admitted, res.Model, step.wantModel)
		}
		switch {
		case step.wantRefused == "" && refused != nil:
			t.Errorf("request %d: got a refusal by %s, want none", i, refused.Trip.Limit.Name)
		case step.wantRefused != "" && (refused == nil || refused.Trip.Limit.Name != step.wantRefused || refused.Model != "gpt-4o-2024-08-06"):
			t.Errorf("request %d: got refusal %+v, want one of gpt-4o-2024-08-06 by %s", i, refused, step.wantRefused)
		}
		if _, err := res.Settle(t.Context(), accounting.Usage{InputTokens: 100, OutputTokens: 20}); err != nil {
			t.Fatal(err)
		}
	}
	// Each model's counters hold what was admitted on it, settled: the
	// refused reservations on the way charged nothing.
	for _, c := range []struct {
		limit string
		model string
		want  int64
	}{
		{"4o-requests", "gpt-4o", 1}, {"mini-requests", "gpt-4o-mini", 1},
		{"tokens-per-model", "gpt-4o", 120}, {"tokens-per-model", "gpt-4o-mini", 120}, {"tokens-per-model", "gpt-4.1-nano", 240},
	} {
		if got := used(t, l, store, c.limit, c.model); got != c.want {
			t.Errorf("%s on %s: got %d used, want %d", c.limit, c.model, got, c.want)
		}
	}
}

// used returns what limit name's counter for tenant t1 and model holds.
func used(t *testing.T, l *accounting.Limiter, store accounting.Store, name, model string) int64 {
	t.Helper()
	attrs := accounting.Attributes{{Name: "tenant", Value: "t1"}, {Name: "model", Value: model}}
	for _, lim := range l.Limits() {
		if lim.Name != name {
			continue
		}
		res, err := store.Reserve(t.Context(), accounting.ReserveRequest{ID: "probe-" + name + model,
			Items: []accounting.ReserveItem{{Counter: lim.Counter(attrs), Amount: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		return lim.Limit - res.States[0].Remaining
	}
	t.Fatalf("no limit %s", name)
	return 0
}

func TestReserveOrDowngradeRefusals(t *testing.T) {
	tests := []struct {
		name string
		can  func(string) bool
		// limits beyond downgradeLimits
		extra []accounting.Limit
	}{
		// The caller cannot rewrite the request for the fallback.
		{"the caller cannot take the fallback", func(string) bool { return false }, nil},
		// The nano fallback has a limit of its own, also spent.
		{"every fallback spent", func(string) bool { return true }, []accounting.Limit{func() accounting.Limit {
			l := limit("nano-requests", accounting.Requests, 1, "tenant")
			l.Match = map[string]string{"model": "gpt-4.1-nano"}
			return l
		}()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, memstore.New(memstore.Options{}), append(downgradeLimits(), tt.extra...)...)
			for _, m := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1-nano"} {
				if res, err := l.Reserve(t.Context(), modelRequest(m)); err != nil || !res.Admitted {
					t.Fatalf("filling %s: %v %v", m, res, err)
				}
			}
			res, refused, err := l.ReserveOrDowngrade(t.Context(), modelRequest("gpt-4o"), tt.can)
			if err != nil {
				t.Fatal(err)
			}
			// The reply is the original model's refusal.
			if res.Admitted || refused != nil || res.Model != "gpt-4o" || res.Trip.Limit.Name != "4o-requests" {
				t.Errorf("got admitted %v on %q, refusal by %v, trip %v; want gpt-4o's refusal by 4o-requests",
					res.Admitted, res.Model, refused, res.Trip.Limit)
			}
		})
	}
}

// TestReserveOrDowngradeStoreFails: the store answers the first
// reservation (a refusal) and fails on the fallback's. The fallback's
// limits decide, as for any request: an error when one fails closed, an
// admission without reservation on the fallback when all fail open.
func TestReserveOrDowngradeStoreFails(t *testing.T) {
	for _, mode := range []accounting.FailMode{accounting.FailClosed, accounting.FailOpen} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			mem := memstore.New(memstore.Options{})
			var calls atomic.Int32
			store := &hookStore{Store: mem, reserve: func(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
				if calls.Add(1) > 2 {
					return accounting.ReserveResult{}, fmt.Errorf("%w: %w: connection refused", accounting.ErrStoreUnavailable, accounting.ErrNotApplied)
				}
				return mem.Reserve(ctx, req)
			}}
			limits := downgradeLimits()[:2]
			for i := range limits {
				limits[i].OnStoreError = mode
			}
			l := newLimiter(t, store, limits...)
			if res, _, err := l.ReserveOrDowngrade(t.Context(), modelRequest("gpt-4o"), func(string) bool { return true }); err != nil || !res.Admitted {
				t.Fatalf("first request: %v %v", res, err)
			}
			res, refused, err := l.ReserveOrDowngrade(t.Context(), modelRequest("gpt-4o"), func(string) bool { return true })
			if mode == accounting.FailClosed {
				if !errors.Is(err, accounting.ErrStoreUnavailable) || res != nil || refused != nil {
					t.Errorf("got %v, %v, %v; want ErrStoreUnavailable alone", res, refused, err)
				}
				return
			}
			if err != nil || !res.Admitted || !res.FailedOpen || res.Model != "gpt-4o-mini" || refused == nil {
				t.Errorf("got %+v, refused %v, %v; want a failed-open admission on gpt-4o-mini", res, refused, err)
			}
		})
	}
}

// TestDowngradeCountsNoRejection: a refusal a downgrade admits is
// counted as a downgrade by its limit, not as a rejection.
func TestDowngradeCountsNoRejection(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}), Limits: downgradeLimits()[:1], Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := l.ReserveOrDowngrade(t.Context(), modelRequest("gpt-4o"), func(string) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := l.ReserveOrDowngrade(t.Context(), modelRequest("gpt-4o"), func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"tokenwarden_downgrades_total": 2, "tokenwarden_rejections_total": 1}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		n, ok := want[f.GetName()]
		if !ok {
			continue
		}
		delete(want, f.GetName())
		m := f.GetMetric()[0]
		if got := m.GetCounter().GetValue(); got != n || m.GetLabel()[0].GetValue() != "4o-requests" {
			t.Errorf("%s: got %v for %v, want %v for limit 4o-requests", f.GetName(), got, m.GetLabel(), n)
		}
	}
	for name := range want {
		t.Errorf("no %s", name)
	}
}
