package accounting

import (
	"testing"
	"time"
)

func TestKeyScopeValue(t *testing.T) {
	attrs := func(kv ...string) Attributes {
		var a Attributes
		for i := 0; i < len(kv); i += 2 {
			a = append(a, Attribute{Name: kv[i], Value: kv[i+1]})
		}
		return a
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip(err)
	}
	tests := []struct {
		name  string
		limit Limit
		attrs Attributes
		want  string
		ok    bool
	}{
		{"scoped", Limit{Name: "daily", Scope: []string{"tenant"}}, attrs("tenant", "acme"), "acme", true},
		{"second in the scope", Limit{Name: "d", Scope: []string{"user", "tenant"}}, attrs("user", "u", "tenant", "acme"), "acme", true},
		{"not scoped by it", Limit{Name: "d", Scope: []string{"user"}}, attrs("user", "tenant"), "", false},
		{"global", Limit{Name: "tenant"}, nil, "", false},
		{"value that looks like fields", Limit{Name: "d", Scope: []string{"user", "tenant"}}, attrs("user", "6:tenant4:evil", "tenant", "acme"), "acme", true},
		{"braces and colons", Limit{Name: "d", Scope: []string{"tenant"}}, attrs("tenant", "{a}:b"), "{a}:b", true},
		{"empty value", Limit{Name: "d", Scope: []string{"tenant"}}, attrs("tenant", ""), "", true},
		{"calendar day in a zone", Limit{Name: "d", Calendar: CalendarDay, Location: tokyo, Scope: []string{"tenant"}}, attrs("tenant", "acme"), "acme", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.limit.Window == 0 {
				tt.limit.Window = time.Hour
			}
			key := CounterKey(&tt.limit, tt.attrs)
			got, ok := KeyScopeValue(key, "tenant")
			if got != tt.want || ok != tt.ok {
				t.Errorf("KeyScopeValue(%q, tenant): got %q, %v; want %q, %v", key, got, ok, tt.want, tt.ok)
			}
		})
	}
	for _, bad := range []string{"", "tw2:", "tw2:f1", "tw2:f1:x", "tw2:f1:1:d6:tenant", "other:f1:1:d6:tenant4:acme"} {
		if v, ok := KeyScopeValue(bad, "tenant"); ok {
			t.Errorf("KeyScopeValue(%q): got %q, true; want false", bad, v)
		}
	}
}

// TestCounterKeySize: counterKeySize is the length of the key, so that
// CounterKey, and a reservation's keys together, are built in one
// allocation.
func TestCounterKeySize(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip(err)
	}
	attrs := Attributes{{Name: "tenant", Value: "acme"}, {Name: "user", Value: ""}, {Name: "team", Value: string(make([]byte, 120))}}
	for _, tc := range []struct {
		name  string
		limit Limit
	}{
		{"minute", Limit{Name: "rpm", Scope: []string{"tenant"}, Algorithm: SlidingWindow, Window: time.Minute}},
		{"day, a longer name", Limit{Name: "tenant-spend", Scope: []string{"tenant"}, Algorithm: FixedWindow, Window: 24 * time.Hour}},
		{"a year", Limit{Name: "y", Algorithm: FixedWindow, Window: 365 * 24 * time.Hour}},
		{"no name, no scope", Limit{Algorithm: TokenBucket, Window: time.Second}},
		{"empty and long values", Limit{Name: "n", Scope: []string{"tenant", "user", "team"}, Algorithm: Leases}},
		{"calendar month in UTC", Limit{Name: "m", Algorithm: FixedWindow, Calendar: CalendarMonth, Location: time.UTC}},
		{"calendar day in Tokyo", Limit{Name: "d", Scope: []string{"tenant"}, Algorithm: FixedWindow, Calendar: CalendarDay, Location: tokyo}},
		{"lifetime", Limit{Name: "run", Scope: []string{"tenant"}, Algorithm: Lifetime, Window: 2 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := CounterKey(&tc.limit, attrs)
			if got := counterKeySize(&tc.limit, attrs); got != len(key) {
				t.Errorf("got size %d, want %d (%q)", got, len(key), key)
			}
			if n := testing.AllocsPerRun(10, func() { CounterKey(&tc.limit, attrs) }); n != 1 {
				t.Errorf("got %.0f allocations, want 1", n)
			}
		})
	}
}
