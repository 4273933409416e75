package accounting_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

func attrs(kv ...string) accounting.Attributes {
	var a accounting.Attributes
	for i := 0; i < len(kv); i += 2 {
		a = append(a, accounting.Attribute{Name: kv[i], Value: kv[i+1]})
	}
	return a
}

// TestUsageListsApplicableLimits: Usage reports the limits Reserve would
// charge, with what Reserve charged, and charges nothing itself.
func TestUsageListsApplicableLimits(t *testing.T) {
	rpm := limit("rpm", accounting.Requests, 10, "tenant")
	tpm := limit("tpm", accounting.Tokens, 1000, "tenant", "user")
	free := limit("free", accounting.Tokens, 500, "tenant")
	free.Match = map[string]string{"tier": "free"}
	gpt := limit("gpt4o", accounting.Tokens, 5000, "tenant", "model")
	gpt.Match = map[string]string{"model": "gpt-4o-2024-08-06"}
	l := newLimiter(t, memstore.New(memstore.Options{}), rpm, tpm, free, gpt)

	req := attrs("tenant", "acme", "user", "u1", "tier", "pro", "model", "gpt-4o")
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: req, Model: "gpt-4o", Estimate: accounting.Estimate{InputTokens: 30, OutputTokens: 70}})
	if err != nil || !r.Admitted {
		t.Fatalf("reserve: %v %+v", err, r)
	}

	tests := []struct {
		name  string
		attrs accounting.Attributes
		want  map[string]int64 // limit name -> used
	}{
		{"the request's own attributes", req, map[string]int64{"rpm": 1, "tpm": 100, "gpt4o": 100}},
		{"a snapshot's name finds its family", attrs("tenant", "acme", "user", "u1", "model", "gpt-4o-2024-08-06"), map[string]int64{"rpm": 1, "tpm": 100, "gpt4o": 100}},
		{"tenant only", attrs("tenant", "acme"), map[string]int64{"rpm": 1}},
		{"another user", attrs("tenant", "acme", "user", "u2"), map[string]int64{"rpm": 1, "tpm": 0}},
		{"free tier", attrs("tenant", "acme", "tier", "free"), map[string]int64{"rpm": 1, "free": 0}},
		{"no tenant", attrs("user", "u1"), map[string]int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time proves the first charged nothing
				got, err := l.Usage(t.Context(), tt.attrs)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("got %d limits, want %d: %+v", len(got), len(tt.want), got)
				}
				for _, u := range got {
					want, ok := tt.want[u.Limit.Name]
					if !ok || u.Used != want || u.Used+u.Remaining != u.Limit.Capacity() {
						t.Errorf("%s: got used %d remaining %d, want used %d of %d", u.Limit.Name, u.Used, u.Remaining, want, u.Limit.Capacity())
					}
					if len(u.Scope) != len(u.Limit.Scope) {
						t.Errorf("%s: got scope %v, want values for %v", u.Limit.Name, u.Scope, u.Limit.Scope)
					}
				}
			}
		})
	}
}

func TestCounterUsageResetAndTop(t *testing.T) {
	tpm := limit("tpm", accounting.Tokens, 1000, "tenant", "user")
	l := newLimiter(t, memstore.New(memstore.Options{}), tpm)
	for user, n := range map[string]int64{"u1": 300, "u2": 100, "u:3": 500} {
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: attrs("tenant", "acme", "user", user), Estimate: accounting.Estimate{InputTokens: n}})
		if err != nil || !r.Admitted {
			t.Fatalf("reserve %s: %v", user, err)
		}
	}

	u, err := l.CounterUsage(t.Context(), "tpm", attrs("user", "u1", "tenant", "acme", "extra", "ignored"))
	if err != nil || u.Used != 300 || !slices.Equal(u.Scope, attrs("tenant", "acme", "user", "u1")) {
		t.Errorf("CounterUsage: got %+v, %v, want used 300 with scope tenant, user", u, err)
	}
	if _, err := l.CounterUsage(t.Context(), "nope", nil); !errors.Is(err, accounting.ErrUnknownLimit) {
		t.Errorf("unknown limit: got %v, want ErrUnknownLimit", err)
	}
	if _, err := l.CounterUsage(t.Context(), "tpm", attrs("tenant", "acme")); !errors.Is(err, accounting.ErrScopeMissing) {
		t.Errorf("missing user: got %v, want ErrScopeMissing", err)
	}

	top, err := l.Top(t.Context(), "tpm", 2, 0)
	if err != nil || !top.Complete || top.Scanned != 3 || len(top.Counters) != 2 {
		t.Fatalf("Top: got %+v, %v, want the 2 heaviest of 3, complete", top, err)
	}
	for i, want := range []struct {
		user string
		used int64
	}{{"u:3", 500}, {"u1", 300}} {
		c := top.Counters[i]
		if got, _ := c.Scope.Get("user"); got != want.user || c.Used != want.used {
			t.Errorf("top[%d]: got %v used %d, want user %s used %d", i, c.Scope, c.Used, want.user, want.used)
		}
	}

	before, existed, err := l.ResetCounter(t.Context(), "tpm", attrs("tenant", "acme", "user", "u:3"))
	if err != nil || !existed || before.Used != 500 {
		t.Fatalf("ResetCounter: got %+v, %v, %v, want the state before (used 500), true", before, existed, err)
	}
	if u, _ := l.CounterUsage(t.Context(), "tpm", attrs("tenant", "acme", "user", "u:3")); u.Used != 0 || u.Remaining != 1000 {
		t.Errorf("after reset: got used %d remaining %d, want 0, 1000", u.Used, u.Remaining)
	}
	if top, _ := l.Top(t.Context(), "tpm", 100, 0); len(top.Counters) != 2 || top.Counters[0].Used != 300 {
		t.Errorf("Top after reset: got %+v, want u1 then u2", top.Counters)
	}
}

// bareStore is a Store without the read side.
type bareStore struct{ accounting.Store }

func TestReadSideNeedsAnInspector(t *testing.T) {
	l := newLimiter(t, bareStore{memstore.New(memstore.Options{})}, limit("rpm", accounting.Requests, 10))
	if _, err := l.Usage(t.Context(), nil); !errors.Is(err, accounting.ErrNotInspectable) {
		t.Errorf("Usage: got %v, want ErrNotInspectable", err)
	}
	if _, err := l.Top(t.Context(), "rpm", 1, 0); !errors.Is(err, accounting.ErrNotInspectable) {
		t.Errorf("Top: got %v, want ErrNotInspectable", err)
	}
}

func TestScopeValues(t *testing.T) {
	l := &accounting.Limit{Name: "tpm", Algorithm: accounting.SlidingWindow, Window: time.Minute, Scope: []string{"tenant", "user"}}
	global := &accounting.Limit{Name: "all", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth}
	key := func(l *accounting.Limit, a accounting.Attributes) string { return accounting.CounterKey(l, a) }
	prefix := accounting.CounterPrefix(l)
	tests := []struct {
		name   string
		limit  *accounting.Limit
		key    string
		want   accounting.Attributes
		wantOK bool
	}{
		{"plain", l, key(l, attrs("tenant", "acme", "user", "u1")), attrs("tenant", "acme", "user", "u1"), true},
		{"values holding separators", l, key(l, attrs("tenant", "a:b", "user", "6:user1:x")), attrs("tenant", "a:b", "user", "6:user1:x"), true},
		{"empty value", l, key(l, attrs("tenant", "", "user", "u")), attrs("tenant", "", "user", "u"), true},
		{"global limit", global, key(global, nil), accounting.Attributes{}, true},
		{"another limit", l, key(global, nil), nil, false},
		{"another scope", l, key(&accounting.Limit{Name: "tpm", Algorithm: accounting.SlidingWindow, Window: time.Minute, Scope: []string{"user"}}, attrs("user", "u1")), nil, false},
		{"trailing bytes", l, key(l, attrs("tenant", "acme", "user", "u1")) + "x", nil, false},
		{"length past the end", l, prefix + "6:tenant99:acme", nil, false},
		{"length with a sign", l, prefix + "6:tenant+4:acme4:user1:u", nil, false},
		{"length with a leading zero", l, prefix + "6:tenant04:acme4:user1:u", nil, false},
		{"no length", l, prefix + ":tenant", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := accounting.ScopeValues(tt.limit, tt.key)
			if ok != tt.wantOK || (ok && !slices.Equal(got, tt.want)) {
				t.Errorf("ScopeValues(%q): got %v, %v, want %v, %v", tt.key, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// FuzzScopeValues: any key either fails to parse or parses to values
// that build the very same key.
func FuzzScopeValues(f *testing.F) {
	l := &accounting.Limit{Name: "tpm", Algorithm: accounting.FixedWindow, Window: time.Hour, Scope: []string{"tenant", "user"}}
	f.Add(accounting.CounterKey(l, attrs("tenant", "acme", "user", "u1")))
	f.Add(accounting.CounterPrefix(l) + "6:tenant99999999999999999999:x")
	f.Add("")
	f.Fuzz(func(t *testing.T, key string) {
		got, ok := accounting.ScopeValues(l, key)
		if ok && accounting.CounterKey(l, got) != key {
			t.Errorf("ScopeValues(%q) = %v, which builds %q", key, got, accounting.CounterKey(l, got))
		}
	})
}

// TestUsageAtTheRequestsValue: a limit whose value comes from an
// attribute (limit_from) is shown at the value the attributes give, as a
// request carrying them would be held to it.
func TestUsageAtTheRequestsValue(t *testing.T) {
	tpm := limit("tpm", accounting.Tokens, 1000, "tenant")
	tpm.From = &accounting.LimitFrom{Attribute: "tpm", Ceiling: 10_000}
	l := newLimiter(t, memstore.New(memstore.Options{}), tpm)
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: attrs("tenant", "acme", "tpm", "5000"), Estimate: accounting.Estimate{InputTokens: 800}})
	if err != nil || !r.Admitted {
		t.Fatalf("reserve: %v", err)
	}
	tests := []struct {
		name          string
		attrs         accounting.Attributes
		limit, remain int64
	}{
		{"the value the request carried", attrs("tenant", "acme", "tpm", "5000"), 5000, 4200},
		{"no value: the limit's own", attrs("tenant", "acme"), 1000, 200},
		{"above the ceiling", attrs("tenant", "acme", "tpm", "99999"), 10_000, 9200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.Usage(t.Context(), tt.attrs)
			if err != nil || len(got) != 1 || got[0].Limit.Limit != tt.limit || got[0].Used != 800 || got[0].Remaining != tt.remain {
				t.Errorf("Usage: got %+v, %v, want limit %d used 800 remaining %d", got, err, tt.limit, tt.remain)
			}
			one, err := l.CounterUsage(t.Context(), "tpm", tt.attrs)
			if err != nil || one.Limit.Limit != tt.limit || one.Remaining != tt.remain {
				t.Errorf("CounterUsage: got %+v, %v, want limit %d remaining %d", one, err, tt.limit, tt.remain)
			}
		})
	}
	if lim, _ := l.Limit("tpm"); lim.Limit != 1000 {
		t.Errorf("the configured limit changed: %d", lim.Limit)
	}
}
