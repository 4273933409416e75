package accounting_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// fields lists the fields of the FieldErrors err joins, in order, and
// fails the test on an error in it that names no field.
func fields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range leaves(err) {
		var fe *accounting.FieldError
		if !errors.As(e, &fe) {
			t.Errorf("error %q names no field", e)
			continue
		}
		out = append(out, fe.Field)
	}
	return out
}

// leaves returns the errors err joins, at any depth, in order.
func leaves(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}

func TestLimitValidate(t *testing.T) {
	ok := accounting.Limit{Name: "tpm", Dimension: accounting.Tokens, Limit: 1, Window: time.Minute}
	tests := []struct {
		name   string
		change func(l *accounting.Limit)
		want   []string // the fields named, in order
	}{
		{"valid", func(*accounting.Limit) {}, nil},
		{"valid month", func(l *accounting.Limit) {
			l.Algorithm, l.Calendar, l.Window = accounting.FixedWindow, accounting.CalendarMonth, 0
		}, nil},
		{"valid bucket with burst", func(l *accounting.Limit) { l.Algorithm, l.Burst = accounting.TokenBucket, 5 }, nil},
		{"valid name at the longest", func(l *accounting.Limit) { l.Name = "a" + strings.Repeat("-", 63) }, nil},
		{"no name", func(l *accounting.Limit) { l.Name = "" }, []string{"name"}},
		{"name with a space", func(l *accounting.Limit) { l.Name = "a b" }, []string{"name"}},
		{"name starting with a dot", func(l *accounting.Limit) { l.Name = ".a" }, []string{"name"}},
		{"name too long", func(l *accounting.Limit) { l.Name = strings.Repeat("a", 65) }, []string{"name"}},
		{"unknown dimension", func(l *accounting.Limit) { l.Dimension = 7 }, []string{"dimension"}},
		{"scope twice", func(l *accounting.Limit) { l.Scope = []string{"tenant", "user", "tenant"} }, []string{"scope[2]"}},
		{"unknown algorithm", func(l *accounting.Limit) { l.Algorithm = 9 }, []string{"algorithm"}},
		{"zero limit", func(l *accounting.Limit) { l.Limit = 0 }, []string{"limit"}},
		{"negative limit", func(l *accounting.Limit) { l.Limit = -5 }, []string{"limit"}},
		{"negative burst", func(l *accounting.Limit) { l.Algorithm, l.Burst = accounting.TokenBucket, -1 }, []string{"burst"}},
		{"burst on a fixed window", func(l *accounting.Limit) { l.Algorithm, l.Burst = accounting.FixedWindow, 2 }, []string{"burst"}},
		{"window too short", func(l *accounting.Limit) { l.Window = time.Millisecond }, []string{"window"}},
		{"window too long", func(l *accounting.Limit) { l.Window = accounting.MaxWindow + time.Second }, []string{"window"}},
		{"no window", func(l *accounting.Limit) { l.Window = 0 }, []string{"window"}},
		{"month on a bucket", func(l *accounting.Limit) {
			l.Algorithm, l.Calendar = accounting.TokenBucket, accounting.CalendarMonth
		}, []string{"window"}},
		{"unknown calendar", func(l *accounting.Limit) { l.Calendar = 5 }, []string{"window"}},
		{"unknown fail mode", func(l *accounting.Limit) { l.OnStoreError = 3 }, []string{"on_store_error"}},
		{"every problem at once", func(l *accounting.Limit) {
			*l = accounting.Limit{Name: "a b", Dimension: 7, Scope: []string{"x", "x"}, Algorithm: accounting.SlidingWindow,
				Limit: -1, Burst: 3, Calendar: accounting.CalendarMonth, OnStoreError: 4}
		}, []string{"name", "dimension", "scope[1]", "limit", "burst", "window", "on_store_error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ok
			tt.change(&l)
			got := fields(t, l.Validate())
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("fields: got %q, want %q (error: %v)", got, tt.want, l.Validate())
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tokens := func(name string) accounting.Limit {
		return accounting.Limit{Name: name, Dimension: accounting.Tokens, Limit: 1, Window: time.Minute}
	}
	cost := func(name, model string) accounting.Limit {
		l := accounting.Limit{Name: name, Dimension: accounting.Cost, Limit: 1, Window: time.Minute}
		if model != "" {
			l.Match = map[string]string{"model": model}
		}
		return l
	}
	tests := []struct {
		name   string
		opts   accounting.Options
		want   []string
		wantIn string // a part of the error's text
	}{
		{"valid", accounting.Options{Limits: []accounting.Limit{tokens("a"), tokens("b")}}, nil, ""},
		{"a limit's own problem", accounting.Options{Limits: []accounting.Limit{tokens("a"), {Name: "b", Limit: 1}}},
			[]string{"limits[1].window"}, "limits[1].window: 0s is outside 1s..31d"},
		{"two limits of one name", accounting.Options{Limits: []accounting.Limit{tokens("a"), tokens("b"), tokens("a")}},
			[]string{"limits[2].name"}, `limits[2].name: "a" is also the name of limits[0]`},
		{"two limits without a name", accounting.Options{Limits: []accounting.Limit{{Limit: 1, Window: time.Minute}, {Limit: 1, Window: time.Minute}}},
			[]string{"limits[0].name", "limits[1].name"}, "required"},
		{"cost limit without prices", accounting.Options{Limits: []accounting.Limit{cost("spend", "")}},
			[]string{"limits[0]"}, "for every model"},
		{"cost limit without a default price", accounting.Options{Limits: []accounting.Limit{cost("spend", "")},
			Prices: accounting.Prices{"gpt-4o": {Input: 1}}}, []string{"limits[0]"}, "for every model"},
		{"cost limit of one model with its price", accounting.Options{Limits: []accounting.Limit{cost("spend", "gpt-4o")},
			Prices: accounting.Prices{"gpt-4o": {Input: 1}}}, nil, ""},
		{"cost limit of one model with the default price", accounting.Options{Limits: []accounting.Limit{cost("spend", "gpt-4o")},
			Prices: accounting.Prices{accounting.DefaultModel: {Input: 1}}}, nil, ""},
		{"cost limit of one model without a price", accounting.Options{Limits: []accounting.Limit{cost("spend", "gpt-4o")},
			Prices: accounting.Prices{"o3": {Input: 1}}}, []string{"limits[0]"}, `for "gpt-4o"`},
		{"bad prices, sorted by model", accounting.Options{Prices: accounting.Prices{
			"m2": {Input: -1}, "m1": {CacheWrite1h: math.NaN(), Output: math.Inf(1)}}},
			[]string{"models.m1.cache_write_1h", "models.m1.output", "models.m2.input"}, "models.m2.input: -1 is not a price"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if got := fields(t, err); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("fields: got %q, want %q (error: %v)", got, tt.want, err)
			}
			if tt.wantIn != "" && (err == nil || !strings.Contains(err.Error(), tt.wantIn)) {
				t.Errorf("error: got %v, want it to say %q", err, tt.wantIn)
			}
		})
	}
}

// TestNewRejectsInvalidOptions: New refuses what Validate reports, with
// the fields named, and needs a store.
func TestNewRejectsInvalidOptions(t *testing.T) {
	_, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}),
		Limits: []accounting.Limit{{Name: "a", Limit: 1, Window: time.Millisecond}}})
	if want := "limits[0].window"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New with a 1ms window: got %v, want an error naming %s", err, want)
	}
	if _, err := accounting.New(accounting.Options{}); err == nil {
		t.Errorf("New without a store: got nil, want an error")
	}
}

func TestPrefixFields(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		err    error
		want   string
	}{
		{"nil", "limits[0]", nil, "<nil>"},
		{"a field", "limits[2]", accounting.FieldErrorf("window", "bad"), "limits[2].window: bad"},
		{"an index", "scope", accounting.FieldErrorf("[1]", "bad"), "scope[1]: bad"},
		{"no field", "store.redis", errors.New("bad"), "store.redis: bad"},
		{"no prefix", "", accounting.FieldErrorf("listen", "bad"), "listen: bad"},
		{"joined and nested", "a", errors.Join(accounting.FieldErrorf("b", "x"),
			errors.Join(accounting.FieldErrorf("c", "y"), nil)), "a.b: x\na.c: y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := "<nil>"
			if err := accounting.PrefixFields(tt.prefix, tt.err); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStoreCallContexts: the Limiter adds no deadline of its own to a
// store call (the store bounds it); Reserve gets the caller's context, and
// Settle a context the caller's cancellation does not reach.
func TestStoreCallContexts(t *testing.T) {
	type key struct{}
	var reserveCtx, settleCtx context.Context
	store := &hookStore{Store: memstore.New(memstore.Options{})}
	store.reserve = func(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
		reserveCtx = ctx
		return store.Store.Reserve(ctx, req)
	}
	store.settle = func(ctx context.Context, req accounting.SettleRequest) error {
		settleCtx = ctx
		return store.Store.Settle(ctx, req)
	}
	l := newLimiter(t, store, limit("tpm", accounting.Tokens, 1000, "tenant"))
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "caller"))
	r, err := l.Reserve(ctx, accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 10}})
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
	}
	if _, has := reserveCtx.Deadline(); has || reserveCtx.Value(key{}) != "caller" {
		t.Errorf("Reserve's store context: got deadline %v and value %v, want the caller's context (no deadline)", has, reserveCtx.Value(key{}))
	}
	cancel()
	if _, err := r.Settle(ctx, accounting.Usage{InputTokens: 5}); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if _, has := settleCtx.Deadline(); has || settleCtx.Err() != nil || settleCtx.Value(key{}) != "caller" {
		t.Errorf("Settle's store context: got deadline %v, err %v, value %v; want the caller's values, never cancelled, no deadline",
			has, settleCtx.Err(), settleCtx.Value(key{}))
	}
}
