package accounting_test

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// fromLimit is a limit whose value comes from the attribute "quota",
// 100 without it, at most 1000 (cost: $100 and $1000).
func fromLimit(d accounting.Dimension) accounting.Limit {
	l := accounting.Limit{Name: "contract", Dimension: d, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow,
		Limit: 100, Window: time.Minute, From: &accounting.LimitFrom{Attribute: "quota", Ceiling: 1000}}
	if d == accounting.Cost {
		l.Limit, l.From.Ceiling = 100_000_000, 1000_000_000
	}
	return l
}

func TestLimitValueFor(t *testing.T) {
	tests := []struct {
		name    string
		dim     accounting.Dimension
		value   *string // nil: no attribute
		want    int64
		wantSrc accounting.LimitValueSource
	}{
		{"absent", accounting.Tokens, nil, 100, accounting.ValueAbsent},
		{"whole number", accounting.Tokens, ptr("750"), 750, accounting.ValueFromAttribute},
		{"leading zeros", accounting.Tokens, ptr("0750"), 750, accounting.ValueFromAttribute},
		{"at the ceiling", accounting.Tokens, ptr("1000"), 1000, accounting.ValueFromAttribute},
		{"one", accounting.Requests, ptr("1"), 1, accounting.ValueFromAttribute},
		{"above the ceiling", accounting.Tokens, ptr("1001"), 1000, accounting.ValueCeiling},
		{"beyond int64", accounting.Tokens, ptr("99999999999999999999999"), 1000, accounting.ValueCeiling},
		{"zero", accounting.Tokens, ptr("0"), 100, accounting.ValueInvalid},
		{"zeros", accounting.Tokens, ptr("000"), 100, accounting.ValueInvalid},
		{"negative", accounting.Tokens, ptr("-5"), 100, accounting.ValueInvalid},
		{"negative beyond int64", accounting.Tokens, ptr("-99999999999999999999999"), 100, accounting.ValueInvalid},
		{"plus sign", accounting.Tokens, ptr("+5"), 100, accounting.ValueInvalid},
		{"fractional tokens", accounting.Tokens, ptr("500.5"), 100, accounting.ValueInvalid},
		{"whole tokens written with a point", accounting.Tokens, ptr("500.0"), 100, accounting.ValueInvalid},
		{"fractional requests", accounting.Requests, ptr("2.5"), 100, accounting.ValueInvalid},
		{"exponent", accounting.Tokens, ptr("1e3"), 100, accounting.ValueInvalid},
		{"hex", accounting.Tokens, ptr("0x10"), 100, accounting.ValueInvalid},
		{"underscores", accounting.Tokens, ptr("1_000"), 100, accounting.ValueInvalid},
		{"spaces", accounting.Tokens, ptr(" 500"), 100, accounting.ValueInvalid},
		{"words", accounting.Tokens, ptr("unlimited"), 100, accounting.ValueInvalid},
		{"infinity", accounting.Tokens, ptr("Inf"), 100, accounting.ValueInvalid},
		{"NaN", accounting.Cost, ptr("NaN"), 100_000_000, accounting.ValueInvalid},
		{"empty", accounting.Tokens, ptr(""), 100, accounting.ValueInvalid},
		{"cost in dollars", accounting.Cost, ptr("250"), 250_000_000, accounting.ValueFromAttribute},
		{"cost in cents", accounting.Cost, ptr("12.34"), 12_340_000, accounting.ValueFromAttribute},
		{"cost to the micro-dollar", accounting.Cost, ptr("0.000001"), 1, accounting.ValueFromAttribute},
		{"cost rounded to the micro-dollar", accounting.Cost, ptr("0.0000015"), 2, accounting.ValueFromAttribute},
		{"cost under half a micro-dollar", accounting.Cost, ptr("0.0000004"), 100_000_000, accounting.ValueInvalid},
		{"cost above the ceiling", accounting.Cost, ptr("1000.000001"), 1000_000_000, accounting.ValueCeiling},
		{"cost beyond a float64", accounting.Cost, ptr("9" + strings.Repeat("9", 400)), 1000_000_000, accounting.ValueCeiling},
		{"cost with a leading point", accounting.Cost, ptr(".5"), 100_000_000, accounting.ValueInvalid},
		{"cost with a trailing point", accounting.Cost, ptr("5."), 100_000_000, accounting.ValueInvalid},
		{"cost with two points", accounting.Cost, ptr("1.2.3"), 100_000_000, accounting.ValueInvalid},
		{"negative cost", accounting.Cost, ptr("-1.5"), 100_000_000, accounting.ValueInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := fromLimit(tt.dim)
			attrs := accounting.Attributes{{Name: "tenant", Value: "t1"}}
			if tt.value != nil {
				attrs = append(attrs, accounting.Attribute{Name: "quota", Value: *tt.value})
			}
			got, src := l.ValueFor(attrs)
			if got != tt.want || src != tt.wantSrc {
				t.Errorf("ValueFor(%v): got %d (%s), want %d (%s)", tt.value, got, src, tt.want, tt.wantSrc)
			}
		})
	}
}

func TestLimitValueForWithoutFrom(t *testing.T) {
	l := limit("plain", accounting.Tokens, 42, "tenant")
	got, src := l.ValueFor(accounting.Attributes{{Name: "quota", Value: "7"}})
	if got != 42 || src != accounting.ValueFromAttribute {
		t.Errorf("ValueFor without LimitFrom: got %d (%s), want 42 (attribute)", got, src)
	}
}

func TestLimitFromValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(l *accounting.Limit)
		want   []string
	}{
		{"valid", func(*accounting.Limit) {}, nil},
		{"valid bucket", func(l *accounting.Limit) { l.Algorithm = accounting.TokenBucket }, nil},
		{"default at the ceiling", func(l *accounting.Limit) { l.Limit = 1000 }, nil},
		{"no attribute", func(l *accounting.Limit) { l.From.Attribute = "" }, []string{"limit_from.attribute"}},
		{"no ceiling", func(l *accounting.Limit) { l.From.Ceiling = 0 }, []string{"limit_from.ceiling"}},
		{"negative ceiling", func(l *accounting.Limit) { l.From.Ceiling = -1 }, []string{"limit_from.ceiling"}},
		{"default above the ceiling", func(l *accounting.Limit) { l.Limit = 1001 }, []string{"limit"}},
		{"burst", func(l *accounting.Limit) { l.Algorithm, l.Burst = accounting.TokenBucket, 500 }, []string{"burst"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := fromLimit(accounting.Tokens)
			from := *l.From
			l.From = &from
			tt.change(&l)
			got := fields(t, l.Validate())
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("fields: got %q, want %q (error: %v)", got, tt.want, l.Validate())
			}
		})
	}
}

// TestReservePerRequestValue: two tenants on one limit are each held to
// their own value, each on their own counter; a value above the ceiling
// gets the ceiling, and one that is not an amount the limit's own
// value, counted and logged, never unlimited.
func TestReservePerRequestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	l, err := accounting.New(accounting.Options{
		Store:      memstore.New(memstore.Options{}),
		Limits:     []accounting.Limit{fromLimit(accounting.Tokens)},
		Registerer: reg,
		Logger:     slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(t.Context()) })

	reserve := func(tenant, quota string, tokens int64) *accounting.Reservation {
		t.Helper()
		attrs := accounting.Attributes{{Name: "tenant", Value: tenant}}
		if quota != "" {
			attrs = append(attrs, accounting.Attribute{Name: "quota", Value: quota})
		}
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: attrs, Estimate: accounting.Estimate{InputTokens: tokens}})
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		return r
	}
	tests := []struct {
		tenant, quota string
		tokens        int64
		admitted      bool
		limit         int64 // the limit stated in the decision
		remaining     int64
	}{
		{"small", "300", 250, true, 300, 50},
		{"small", "300", 51, false, 300, 50},
		{"big", "900", 851, true, 900, 49},
		{"default", "", 100, true, 100, 0},
		{"garbage", "lots", 101, false, 100, 100},
		{"greedy", "5000000", 1001, false, 1000, 1000},
		{"greedy", "5000000", 1000, true, 1000, 0},
		// The small tenant's contract grows mid-window: the window keeps
		// what it holds.
		{"small", "600", 351, false, 600, 350},
		{"small", "600", 350, true, 600, 0},
	}
	for i, tt := range tests {
		r := reserve(tt.tenant, tt.quota, tt.tokens)
		st := r.Dims[accounting.Tokens]
		if !tt.admitted {
			if r.Admitted {
				t.Fatalf("step %d (%s %q, %d tokens): admitted, want rejected", i, tt.tenant, tt.quota, tt.tokens)
			}
			if got := r.Trip.Limit.Capacity(); got != tt.limit {
				t.Errorf("step %d: the rejection's limit: got %d, want %d", i, got, tt.limit)
			}
			if r.Trip.Limit.From == nil || r.Trip.Limit.Name != "contract" {
				t.Errorf("step %d: the rejection names %+v, want the contract limit", i, r.Trip.Limit)
			}
		} else if !r.Admitted {
			t.Fatalf("step %d (%s %q, %d tokens): rejected by %+v, want admitted", i, tt.tenant, tt.quota, tt.tokens, r.Trip)
		}
		if st.Limit != tt.limit || st.Remaining != tt.remaining {
			t.Errorf("step %d (%s %q): limit %d remaining %d, want %d and %d", i, tt.tenant, tt.quota, st.Limit, st.Remaining, tt.limit, tt.remaining)
		}
	}
	if got := l.Limits()[0].Limit; got != 100 {
		t.Errorf("the configured limit changed to %d, want 100", got)
	}
	for src, want := range map[string]float64{"attribute": 5, "absent": 1, "invalid": 1, "ceiling": 2} {
		got := gathered(t, reg, "tokenwarden_limit_values_total", "limit", "contract", "source", src)
		if got != want {
			t.Errorf("tokenwarden_limit_values_total{limit=contract,source=%s}: got %v, want %v", src, got, want)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), `value=lots`) {
		t.Errorf("warnings: got %d (%s), want one naming the value", n, logs.String())
	}
}

func ptr(s string) *string { return &s }

// TestLimitFromKeepsTiers: a limit matched to one tier takes its value
// from the attribute only for that tier's requests; a free-tier tenant
// that carries a generous value is still held to the free tier's fixed
// limit.
func TestLimitFromKeepsTiers(t *testing.T) {
	free := limit("free-tpm", accounting.Tokens, 100, "tenant")
	free.Match = map[string]string{"tier": "free"}
	pro := fromLimit(accounting.Tokens)
	pro.Name, pro.Match = "pro-tpm", map[string]string{"tier": "pro"}
	l := newLimiter(t, memstore.New(memstore.Options{}), free, pro)
	reserve := func(tier string, tokens int64) *accounting.Reservation {
		t.Helper()
		attrs := accounting.Attributes{{Name: "tenant", Value: tier + "-tenant"}, {Name: "tier", Value: tier}, {Name: "quota", Value: "900"}}
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: attrs, Estimate: accounting.Estimate{InputTokens: tokens}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := reserve("free", 101); r.Admitted || r.Trip.Limit.Name != "free-tpm" || !r.Trip.NeverFits {
		t.Errorf("free tier, 101 tokens: admitted %v by %+v; want refused by free-tpm, never fitting its 100", r.Admitted, r.Trip)
	}
	if r := reserve("pro", 900); !r.Admitted || r.Dims[accounting.Tokens].Limit != 900 {
		t.Errorf("pro tier, 900 tokens: admitted %v, limit %d; want admitted on the value 900", r.Admitted, r.Dims[accounting.Tokens].Limit)
	}
}

// FuzzLimitValue: whatever an attribute holds, the value is the
// limit's own, the ceiling, or a positive amount up to the ceiling; and
// a plain decimal whole number within the bounds is taken as it is.
func FuzzLimitValue(f *testing.F) {
	for _, s := range []string{"", "0", "1", "750", "1000", "1001", "-5", "+5", " 5", "5 ", "1e3", "0x10", "1_000", "2.5", ".5", "5.",
		"99999999999999999999999", "00000000000000000000000750", "NaN", "Inf", "1.0000005", "٣", "１２"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, cost bool) {
		d := accounting.Tokens
		if cost {
			d = accounting.Cost
		}
		l := fromLimit(d)
		got, src := l.ValueFor(accounting.Attributes{{Name: "quota", Value: s}})
		switch src {
		case accounting.ValueInvalid:
			if got != l.Limit {
				t.Fatalf("%q: invalid, but value %d, not the limit's own %d", s, got, l.Limit)
			}
		case accounting.ValueCeiling:
			if got != l.From.Ceiling {
				t.Fatalf("%q: ceiling, but value %d, not %d", s, got, l.From.Ceiling)
			}
		case accounting.ValueFromAttribute:
			if got < 1 || got > l.From.Ceiling {
				t.Fatalf("%q: value %d outside 1..%d", s, got, l.From.Ceiling)
			}
		default:
			t.Fatalf("%q: source %s", s, src)
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && !cost && s[0] >= '0' && s[0] <= '9' {
			want, wantSrc := n, accounting.ValueFromAttribute
			switch {
			case n == 0:
				want, wantSrc = l.Limit, accounting.ValueInvalid
			case n > l.From.Ceiling:
				want, wantSrc = l.From.Ceiling, accounting.ValueCeiling
			}
			if got != want || src != wantSrc {
				t.Fatalf("%q: got %d (%s), want %d (%s)", s, got, src, want, wantSrc)
			}
		}
	})
}

// TestReconfigureCountsLimitValues: a reconfigured Limiter counts its
// limits' value sources in the collector the first one registered.
func TestReconfigureCountsLimitValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := accounting.New(accounting.Options{
		Store:      memstore.New(memstore.Options{}),
		Limits:     []accounting.Limit{fromLimit(accounting.Tokens)},
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Close(t.Context()) })
	next, err := first.Reconfigure(accounting.Options{Limits: []accounting.Limit{fromLimit(accounting.Tokens)}})
	if err != nil {
		t.Fatal(err)
	}
	attrs := accounting.Attributes{{Name: "tenant", Value: "t"}, {Name: "quota", Value: "300"}}
	if _, err := next.Reserve(t.Context(), accounting.Request{Attributes: attrs, Estimate: accounting.Estimate{InputTokens: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := gathered(t, reg, "tokenwarden_limit_values_total", "limit", "contract", "source", "attribute"); got != 1 {
		t.Errorf("tokenwarden_limit_values_total{source=attribute} after a reconfigure: got %v, want 1", got)
	}
}
