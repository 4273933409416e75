package accounting

import (
	"fmt"
	"strconv"
	"strings"
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

// refCounterKey is CounterKey written the plain way, the reference that
// FuzzCounterKey holds the stack-buffered writer to.
func refCounterKey(l *Limit, attrs Attributes) string {
	s := KeyPrefix + algorithmCode(l.Algorithm, l.Calendar)
	if l.Calendar == NoCalendar {
		s += strconv.FormatInt(l.Window.Milliseconds(), 10)
	}
	if l.Location != nil && l.Location != time.UTC && l.Calendar != NoCalendar {
		s += "@" + l.Location.String()
	}
	field := func(v string) string { return fmt.Sprintf("%d:%s", len(v), v) }
	s += ":" + field(l.Name)
	for _, name := range l.Scope {
		v, _ := attrs.Get(name)
		s += field(name) + field(v)
	}
	return s
}

// TestCounterKeyBytes pins the key's bytes (a shared Redis holds
// counters under them: a change must bump KeyPrefix).
func TestCounterKeyBytes(t *testing.T) {
	long := strings.Repeat("v", 123)
	for _, tc := range []struct {
		name  string
		limit Limit
		attrs Attributes
		want  string
	}{
		{"sliding minute", Limit{Name: "rpm", Scope: []string{"tenant"}, Algorithm: SlidingWindow, Window: time.Minute},
			Attributes{{Name: "tenant", Value: "acme"}}, "tw2:w60000:3:rpm6:tenant4:acme"},
		{"lengths of two and three digits", Limit{Name: "a-limit-name", Scope: []string{"user"}, Algorithm: FixedWindow, Window: time.Hour},
			Attributes{{Name: "user", Value: long}}, "tw2:f3600000:12:a-limit-name4:user123:" + long},
		{"absent value", Limit{Name: "c", Scope: []string{"user"}, Algorithm: Leases},
			nil, "tw2:c0:1:c4:user0:"},
		{"calendar day", Limit{Name: "d", Algorithm: FixedWindow, Calendar: CalendarDay}, nil, "tw2:fd:1:d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CounterKey(&tc.limit, tc.attrs); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzCounterKey holds CounterKey to refCounterKey for any name, scope
// value and window, and counterKeySize to its length.
func FuzzCounterKey(f *testing.F) {
	f.Add("rpm", "acme", int64(60000), uint8(0))
	f.Add(strings.Repeat("n", 99), strings.Repeat("v", 100), int64(-1), uint8(1))
	f.Add("", "", int64(0), uint8(2))
	f.Fuzz(func(t *testing.T, name, value string, windowMs int64, algo uint8) {
		algos := []Algorithm{SlidingWindow, FixedWindow, TokenBucket, Leases, Lifetime}
		l := Limit{Name: name, Scope: []string{"user", "tenant"}, Algorithm: algos[int(algo)%len(algos)], Window: time.Duration(windowMs) * time.Millisecond}
		attrs := Attributes{{Name: "user", Value: value}, {Name: "tenant", Value: name + value}}
		got, want := CounterKey(&l, attrs), refCounterKey(&l, attrs)
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		if n := counterKeySize(&l, attrs); n != len(got) {
			t.Fatalf("got size %d, want %d", n, len(got))
		}
	})
}
