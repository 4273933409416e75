package accounting_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// leasesHeld reads tokenwarden_concurrent_leases{limit}.
func leasesHeld(t *testing.T, reg *prometheus.Registry, limit string) float64 {
	t.Helper()
	return gathered(t, reg, "tokenwarden_concurrent_leases", "limit", limit)
}

// TestShadowConcurrentLimit: a shadow concurrent limit takes a lease
// only when one is free and returns it at settlement; a request that
// finds none is admitted and named, holds no lease (so its settlement
// frees no one else's), and the limit never shows in the headers. The
// leases gauge counts the shadow leases held, and comes back to zero.
func TestShadowConcurrentLimit(t *testing.T) {
	shadow := accounting.Limit{Name: "in-flight-next", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
		Scope: []string{"tenant"}, Limit: 1, Window: time.Minute, Mode: accounting.Shadow}
	l, reg := limiterWithMetrics(t, memstore.New(memstore.Options{}), limit("rpm", accounting.Requests, 100, "tenant"), shadow)
	defer closeLimiter(t, l)
	reserve := func() *accounting.Reservation {
		t.Helper()
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, RequestsOnly: true})
		if err != nil || !r.Admitted {
			t.Fatalf("got %+v, %v; want admitted", r, err)
		}
		if r.Dims[accounting.Concurrent].Applied {
			t.Errorf("concurrent headers: got %+v, want none from a shadow limit", r.Dims[accounting.Concurrent])
		}
		return r
	}
	settle := func(r *accounting.Reservation) {
		t.Helper()
		if _, err := r.Settle(t.Context(), accounting.Usage{}); err != nil {
			t.Fatal(err)
		}
	}

	a := reserve()
	if a.ShadowRejected != nil {
		t.Errorf("a free slot: shadow rejected %v, want none", shadowNames(a))
	}
	b := reserve()
	if got := shadowNames(b); !slices.Equal(got, []string{"in-flight-next"}) {
		t.Errorf("no slot free: shadow rejected %v, want [in-flight-next]", got)
	}
	if got := leasesHeld(t, reg, "in-flight-next"); got != 1 {
		t.Errorf("leases held: got %v, want 1 (a's)", got)
	}
	settle(b)
	if got := shadowNames(reserve()); !slices.Equal(got, []string{"in-flight-next"}) {
		t.Errorf("after b settled: shadow rejected %v, want [in-flight-next] (a still holds the slot)", got)
	}
	settle(a)
	if got := leasesHeld(t, reg, "in-flight-next"); got != 0 {
		t.Errorf("leases held after a settled: got %v, want 0", got)
	}
	d := reserve()
	if d.ShadowRejected != nil {
		t.Errorf("after a settled: shadow rejected %v, want none", shadowNames(d))
	}
	settle(d)
	if got, want := shadowCount(t, reg, "in-flight-next", "would_reject"), 2.0; got != want {
		t.Errorf("would_reject: got %v, want %v", got, want)
	}
	if got, want := shadowCount(t, reg, "in-flight-next", "would_admit"), 2.0; got != want {
		t.Errorf("would_admit: got %v, want %v", got, want)
	}
}

// TestShadowLifetimeLimit: a shadow run budget never ends a run: a step
// over it, or past its time, is admitted and named; and when an
// enforced limit rejects a step, the trip is the enforced limit's, not
// final (no run_over), however far over the shadow budget the run is.
func TestShadowLifetimeLimit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	store := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	run := accounting.Attributes{{Name: "run", Value: "r1"}}
	perMinute := accounting.Limit{Name: "per-minute", Dimension: accounting.Requests, Scope: []string{"run"},
		Algorithm: accounting.FixedWindow, Limit: 4, Window: time.Minute}
	steps := accounting.Limit{Name: "run-steps-next", Dimension: accounting.Requests, Scope: []string{"run"},
		Algorithm: accounting.Lifetime, Limit: 2, Window: time.Hour, Mode: accounting.Shadow}
	l, _ := limiterWithMetrics(t, store, perMinute, steps)
	defer closeLimiter(t, l)

	var last *accounting.Reservation
	for i := range 4 {
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: run})
		if err != nil || !r.Admitted || r.Outcome() != accounting.OutcomeAdmitted {
			t.Fatalf("step %d: got %+v, %v; want admitted", i+1, r, err)
		}
		want := []string(nil)
		if i >= 2 {
			want = []string{"run-steps-next"}
		}
		if got := shadowNames(r); !slices.Equal(got, want) {
			t.Errorf("step %d: shadow rejected %v, want %v", i+1, got, want)
		}
		last = r
	}
	if last.Trip != (accounting.Trip{}) {
		t.Errorf("an admitted step over the shadow budget: trip %+v, want none", last.Trip)
	}

	// The fifth is over the enforced per-minute limit too.
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: run})
	if err != nil || r.Admitted {
		t.Fatalf("step 5: got %+v, %v; want rejected", r, err)
	}
	if r.Trip.Limit.Name != "per-minute" || r.Trip.Final || r.Outcome() != accounting.OutcomeRejected {
		t.Errorf("step 5: trip %s, final %v, outcome %s; want per-minute, not final, rejected", r.Trip.Limit.Name, r.Trip.Final, r.Outcome())
	}

	// Past the shadow run's time: admitted all the same.
	now = now.Add(time.Hour)
	r, err = l.Reserve(t.Context(), accounting.Request{Attributes: run})
	if err != nil || !r.Admitted || !slices.Equal(shadowNames(r), []string{"run-steps-next"}) {
		t.Fatalf("past the shadow run's time: got %+v, %v; want admitted, run-steps-next named", r, err)
	}
}

// TestShadowLimitFromValue: a shadow limit whose value comes from an
// identity attribute reaches the reservation as a copy holding the
// request's value; its would-rejects are counted and logged under its
// name all the same.
func TestShadowLimitFromValue(t *testing.T) {
	shadow := fromLimit(accounting.Requests)
	shadow.Mode = accounting.Shadow
	l, reg := limiterWithMetrics(t, memstore.New(memstore.Options{}), shadow)
	defer closeLimiter(t, l)
	attrs := accounting.Attributes{{Name: "tenant", Value: "t1"}, {Name: "quota", Value: "1"}}
	for i, want := range []float64{0, 1, 2} {
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: attrs})
		if err != nil || !r.Admitted {
			t.Fatalf("request %d: got %+v, %v; want admitted", i+1, r, err)
		}
		if got := shadowCount(t, reg, "contract", "would_reject"); got != want {
			t.Errorf("request %d: would_reject: got %v, want %v", i+1, got, want)
		}
	}
}

// TestShadowTimeZoneValidate: a shadow limit is validated as an
// enforced one, and a time zone belongs only to a calendar window, so
// not to a concurrent limit or a run budget, shadow or not.
func TestShadowTimeZoneValidate(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	concurrent := accounting.Limit{Name: "c", Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Limit: 2, Window: time.Minute}
	lifetime := accounting.Limit{Name: "r", Dimension: accounting.Requests, Algorithm: accounting.Lifetime, Limit: 2, Window: time.Hour}
	tests := []struct {
		name   string
		limit  accounting.Limit
		change func(l *accounting.Limit)
		want   []string
	}{
		{"shadow concurrent", concurrent, func(l *accounting.Limit) { l.Mode = accounting.Shadow }, nil},
		{"shadow lifetime", lifetime, func(l *accounting.Limit) { l.Mode = accounting.Shadow }, nil},
		{"concurrent, unknown mode", concurrent, func(l *accounting.Limit) { l.Mode = 7 }, []string{"mode"}},
		{"lifetime, unknown mode", lifetime, func(l *accounting.Limit) { l.Mode = 7 }, []string{"mode"}},
		{"concurrent in a zone", concurrent, func(l *accounting.Limit) { l.Location = berlin }, []string{"time_zone"}},
		{"shadow lifetime in a zone", lifetime, func(l *accounting.Limit) { l.Location, l.Mode = berlin, accounting.Shadow }, []string{"time_zone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.limit
			tt.change(&l)
			if got := fields(t, l.Validate()); !slices.Equal(got, tt.want) {
				t.Errorf("fields: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestShadowAfterReconfigure: a shadow limit added by a reload counts
// its decisions, and its leases, in the collectors registered at start.
func TestShadowAfterReconfigure(t *testing.T) {
	store := memstore.New(memstore.Options{})
	first, reg := limiterWithMetrics(t, store, limit("rpm", accounting.Requests, 100, "tenant"))
	defer closeLimiter(t, first)
	shadow := accounting.Limit{Name: "in-flight-next", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
		Scope: []string{"tenant"}, Limit: 1, Window: time.Minute, Mode: accounting.Shadow}
	next, err := first.Reconfigure(accounting.Options{Limits: []accounting.Limit{limit("rpm", accounting.Requests, 100, "tenant"), shadow}})
	if err != nil {
		t.Fatal(err)
	}
	var held []*accounting.Reservation
	for range 2 {
		r, err := next.Reserve(t.Context(), accounting.Request{Attributes: tenant, RequestsOnly: true})
		if err != nil || !r.Admitted {
			t.Fatalf("got %+v, %v; want admitted", r, err)
		}
		held = append(held, r)
	}
	if got := shadowCount(t, reg, "in-flight-next", "would_admit"); got != 1 {
		t.Errorf("would_admit: got %v, want 1", got)
	}
	if got := shadowCount(t, reg, "in-flight-next", "would_reject"); got != 1 {
		t.Errorf("would_reject: got %v, want 1", got)
	}
	if got := leasesHeld(t, reg, "in-flight-next"); got != 1 {
		t.Errorf("leases held: got %v, want 1", got)
	}
	for _, r := range held {
		if _, err := r.Settle(t.Context(), accounting.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := leasesHeld(t, reg, "in-flight-next"); got != 0 {
		t.Errorf("leases held after settling: got %v, want 0", got)
	}
}
