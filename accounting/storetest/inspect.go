package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// RunInspect runs the contract suite of [accounting.Inspector], the
// read side a Store may implement: Peek reports what Reserve reports and
// charges nothing, ResetCounter makes a full counter admit again, and
// Top orders and bounds. newHarness is called once per subtest and must
// return an empty store that implements Inspector.
func RunInspect(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, in accounting.Inspector)
	}{
		{"PeekAgreesWithReserve", testPeekAgrees},
		{"PeekChargesNothing", testPeekChargesNothing},
		{"PeekAfterOvercharge", testPeekAfterOvercharge},
		{"Reset", testReset},
		{"ResetIsExact", testResetExact},
		{"ResetIsExactForLeases", testResetExactLeases},
		{"ResetIsExactForARun", testResetExactRun},
		{"ResetIsExactForAHold", testResetExactHold},
		{"TopOrders", testTopOrders},
		{"TopBounds", testTopBounds},
		{"TopForgetsPastWindows", testTopForgets},
		{"Leases", testInspectLeases},
		{"Lifetime", testInspectLifetime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			in, ok := h.Store.(accounting.Inspector)
			if !ok {
				t.Fatalf("%T does not implement accounting.Inspector", h.Store)
			}
			tt.fn(t, h, in)
		})
	}
}

// inspectCounters are one counter of each algorithm, a calendar month,
// and a calendar day and month in time zones, whose state barely moves
// while a test runs on a store whose clock keeps running (a bucket
// refilling 100 an hour).
func inspectCounters(t *testing.T, prefix string) []accounting.Counter {
	month := accounting.Limit{Name: prefix + "-month", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 100}
	bucket := accounting.Limit{Name: prefix + "-bucket", Algorithm: accounting.TokenBucket, Limit: 100, Burst: 100, Window: time.Hour}
	day := accounting.Limit{Name: prefix + "-day", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay,
		Window: 24 * time.Hour, Limit: 100, Location: mustLoad(t, "Asia/Tokyo")}
	zonedMonth := accounting.Limit{Name: prefix + "-zoned-month", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth,
		Limit: 100, Location: mustLoad(t, "America/New_York")}
	return []accounting.Counter{
		counter(prefix+"-fixed", accounting.FixedWindow, 100, time.Hour),
		month.Counter(nil),
		counter(prefix+"-sliding", accounting.SlidingWindow, 100, time.Hour),
		bucket.Counter(nil),
		day.Counter(nil),
		zonedMonth.Counter(nil),
	}
}

func name(c accounting.Counter) string {
	zone := ""
	if c.Location != nil {
		zone = "_in_a_zone"
	}
	switch c.Calendar {
	case accounting.CalendarMonth:
		return "calendar_month" + zone
	case accounting.CalendarDay:
		return "calendar_day" + zone
	}
	return c.Algorithm.String()
}

func peek(t *testing.T, in accounting.Inspector, cs ...accounting.Counter) []accounting.CounterUsage {
	t.Helper()
	got, err := in.Peek(context.Background(), cs)
	if err != nil {
		t.Fatalf("Peek: %v", err)
	}
	if len(got) != len(cs) {
		t.Fatalf("Peek returned %d states for %d counters", len(got), len(cs))
	}
	return got
}

func assertUsage(t *testing.T, h Harness, got accounting.CounterUsage, used, remaining int64, reset time.Duration) {
	t.Helper()
	if got.Used != used || got.Remaining != remaining {
		t.Errorf("used, remaining: got %d, %d, want %d, %d", got.Used, got.Remaining, used, remaining)
	}
	assertDuration(t, h, "reset", got.Reset, reset)
}

func testPeekAgrees(t *testing.T, h Harness, in accounting.Inspector) {
	for _, c := range inspectCounters(t, "peek") {
		t.Run(name(c), func(t *testing.T) {
			fresh := peek(t, in, c)[0]
			if _, ok := h.TTL(c.Key); ok {
				t.Errorf("Peek created the key of a counter never charged")
			}
			var freshReset time.Duration
			if c.Algorithm == accounting.FixedWindow {
				// A fixed window's reset is its end, charged or not.
				freshReset = mustReject(t, h, c, 101).Reset
			}
			assertUsage(t, h, fresh, 0, 100, freshReset)

			st := mustAdmit(t, h, c, 40)
			assertUsage(t, h, peek(t, in, c)[0], 40, st.Remaining, st.Reset)
			st = mustAdmit(t, h, c, 25)
			assertUsage(t, h, peek(t, in, c)[0], 65, st.Remaining, st.Reset)
			// A rejection reports the state before it, as Peek does.
			st = mustReject(t, h, c, 50)
			assertUsage(t, h, peek(t, in, c)[0], 65, st.Remaining, st.Reset)
			if st.Remaining != 35 {
				t.Errorf("remaining after 65 of 100: got %d, want 35", st.Remaining)
			}
		})
	}
}

func testPeekChargesNothing(t *testing.T, h Harness, in accounting.Inspector) {
	for _, c := range inspectCounters(t, "peek-free") {
		t.Run(name(c), func(t *testing.T) {
			mustAdmit(t, h, c, 30)
			for range 5 {
				peek(t, in, c, c)
			}
			mustAdmit(t, h, c, 70)
			mustReject(t, h, c, 1)
		})
	}
}

// testPeekAfterOvercharge: a settlement that charged more than was left
// shows as negative remaining and usage above capacity.
func testPeekAfterOvercharge(t *testing.T, h Harness, in accounting.Inspector) {
	for _, c := range inspectCounters(t, "peek-over") {
		t.Run(name(c), func(t *testing.T) {
			res, req := reserve(t, h, item(c, 90))
			settle(t, h, req, res, 130)
			got := peek(t, in, c)[0]
			if got.Used != 130 || got.Remaining != -30 {
				t.Errorf("used, remaining: got %d, %d, want 130, -30", got.Used, got.Remaining)
			}
		})
	}
}

func testReset(t *testing.T, h Harness, in accounting.Inspector) {
	for _, c := range inspectCounters(t, "reset") {
		t.Run(name(c), func(t *testing.T) {
			other := c
			other.Key += "-other"
			mustAdmit(t, h, c, 100)
			mustAdmit(t, h, other, 100)
			mustReject(t, h, c, 1)
			existed, err := in.ResetCounter(context.Background(), c)
			if err != nil || !existed {
				t.Fatalf("ResetCounter of a charged counter: got %v, %v, want true, nil", existed, err)
			}
			if got := peek(t, in, c)[0]; got.Used != 0 || got.Remaining != 100 {
				t.Errorf("after reset: got used %d, remaining %d, want 0, 100", got.Used, got.Remaining)
			}
			mustAdmit(t, h, c, 100)
			mustReject(t, h, other, 1) // only the one counter
			if _, err := in.ResetCounter(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			existed, err = in.ResetCounter(context.Background(), c)
			if err != nil || existed {
				t.Errorf("ResetCounter of an absent counter: got %v, %v, want false, nil", existed, err)
			}
		})
	}
}

// perUser is a limit scoped by user, whose counters Top lists.
func perUser(alg accounting.Algorithm) *accounting.Limit {
	l := &accounting.Limit{Name: "top-" + alg.String(), Algorithm: alg, Limit: 1000, Window: time.Hour, Scope: []string{"user"}}
	if alg == accounting.TokenBucket {
		l.Burst = 1000
	}
	return l
}

func userCounter(l *accounting.Limit, user string) accounting.Counter {
	return l.Counter(accounting.Attributes{{Name: "user", Value: user}})
}

func top(t *testing.T, in accounting.Inspector, l *accounting.Limit, n, maxScan int) accounting.TopResult {
	t.Helper()
	res, err := in.Top(context.Background(), accounting.TopRequest{Prefix: accounting.CounterPrefix(l), Counter: l.Counter(nil), N: n, MaxScan: maxScan})
	if err != nil {
		t.Fatalf("Top: %v", err)
	}
	return res
}

func testTopOrders(t *testing.T, h Harness, in accounting.Inspector) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			l := perUser(alg)
			// Another limit of a longer name that starts alike, and a
			// user whose value looks like more fields: neither may be
			// taken for one of l's counters.
			lookalike := *l
			lookalike.Name += "x"
			mustAdmit(t, h, userCounter(&lookalike, "zed"), 999)
			amounts := map[string]int64{"ann": 50, "bob": 300, "cy": 120, "dee": 300, "4:user1:x": 7}
			for user, a := range amounts {
				mustAdmit(t, h, userCounter(l, user), a)
			}
			res := top(t, in, l, 3, 1000)
			if !res.Complete || res.Scanned != len(amounts) {
				t.Errorf("complete, scanned: got %v, %d, want true, %d", res.Complete, res.Scanned, len(amounts))
			}
			want := []struct {
				user string
				used int64
			}{{"bob", 300}, {"dee", 300}, {"cy", 120}}
			// bob and dee tie on usage: the key decides.
			if userCounter(l, "dee").Key < userCounter(l, "bob").Key {
				want[0], want[1] = want[1], want[0]
			}
			if len(res.Counters) != len(want) {
				t.Fatalf("got %d counters, want %d: %+v", len(res.Counters), len(want), res.Counters)
			}
			for i, w := range want {
				got := res.Counters[i]
				if got.Key != userCounter(l, w.user).Key || got.Used != w.used || got.Remaining != 1000-w.used {
					t.Errorf("counters[%d]: got %s used %d remaining %d, want %s used %d", i, got.Key, got.Used, got.Remaining, userCounter(l, w.user).Key, w.used)
				}
			}
		})
	}
}

func testTopBounds(t *testing.T, h Harness, in accounting.Inspector) {
	l := perUser(accounting.FixedWindow)
	const users = 60
	for i := range users {
		mustAdmit(t, h, userCounter(l, fmt.Sprintf("u%02d", i)), int64(i+1))
	}
	res := top(t, in, l, 5, 10)
	if res.Complete {
		t.Errorf("complete after examining at most 10 of %d counters: got true", users)
	}
	if res.Scanned > 10 {
		t.Errorf("scanned: got %d, want at most 10", res.Scanned)
	}
	if len(res.Counters) > 5 {
		t.Errorf("got %d counters, want at most 5", len(res.Counters))
	}
	for i, c := range res.Counters {
		// Each is right, whatever the sample.
		var u int
		if _, err := fmt.Sscanf(c.Key[len(accounting.CounterPrefix(l)):], "4:user3:u%02d", &u); err != nil {
			t.Fatalf("counters[%d]: key %q: %v", i, c.Key, err)
		}
		if c.Used != int64(u+1) {
			t.Errorf("counters[%d] (u%02d): used %d, want %d", i, u, c.Used, u+1)
		}
		if i > 0 && c.Used > res.Counters[i-1].Used {
			t.Errorf("counters out of order: %d after %d", c.Used, res.Counters[i-1].Used)
		}
	}
	if all := top(t, in, l, 5, 10_000); !all.Complete || all.Scanned != users || len(all.Counters) != 5 || all.Counters[0].Used != users {
		t.Errorf("full scan: got complete %v, scanned %d, %d counters, want true, %d, 5 led by used %d", all.Complete, all.Scanned, len(all.Counters), users, users)
	}
}

func testTopForgets(t *testing.T, h Harness, in accounting.Inspector) {
	l := perUser(accounting.SlidingWindow)
	l.Window = 10 * time.Second
	mustAdmit(t, h, userCounter(l, "old"), 10)
	h.Advance(6 * time.Second)
	mustAdmit(t, h, userCounter(l, "new"), 5)
	h.Advance(6 * time.Second) // "old" has left the window, "new" has not
	res := top(t, in, l, 10, 1000)
	if len(res.Counters) != 1 || res.Counters[0].Key != userCounter(l, "new").Key || res.Counters[0].Used != 5 {
		t.Errorf("got %+v, want only the counter of user new, used 5", res.Counters)
	}
}

// testInspectLeases: a concurrent limit's counter shows the leases held
// (expired ones not counted), a reset frees every slot, and Top lists
// the scopes holding the most.
func testInspectLeases(t *testing.T, h Harness, in accounting.Inspector) {
	c := leaseCounter("inspect-leases", 3, time.Minute)
	if got := peek(t, in, c)[0]; got.Used != 0 || got.Remaining != 3 {
		t.Errorf("no lease: got used %d remaining %d, want 0, 3", got.Used, got.Remaining)
	}
	st := mustAdmit(t, h, c, 1)
	assertUsage(t, h, peek(t, in, c)[0], 1, st.Remaining, st.Reset)
	res, req := reserve(t, h, item(c, 1))
	assertUsage(t, h, peek(t, in, c)[0], 2, res.States[0].Remaining, res.States[0].Reset)
	settle(t, h, req, res, 1) // the lease goes back
	if got := peek(t, in, c)[0]; got.Used != 1 {
		t.Errorf("after a settlement: got used %d, want 1", got.Used)
	}
	mustAdmit(t, h, c, 1)
	mustAdmit(t, h, c, 1)
	mustReject(t, h, c, 1)
	if got := peek(t, in, c)[0]; got.Used != 3 || got.Remaining != 0 {
		t.Errorf("full: got used %d remaining %d, want 3, 0", got.Used, got.Remaining)
	}
	l := &accounting.Limit{Name: "inspect-leases", Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Limit: 3, Window: time.Minute}
	if res := top(t, in, l, 5, 1000); len(res.Counters) != 1 || res.Counters[0].Key != c.Key || res.Counters[0].Used != 3 {
		t.Errorf("Top: got %+v, want the one counter, used 3", res.Counters)
	}
	if existed, err := in.ResetCounter(context.Background(), c); err != nil || !existed {
		t.Fatalf("ResetCounter: got %v, %v, want true", existed, err)
	}
	mustAdmit(t, h, c, 1)
	h.Advance(2 * time.Minute) // every lease has expired
	if got := peek(t, in, c)[0]; got.Used != 0 || got.Remaining != 3 {
		t.Errorf("after the leases expired: got used %d remaining %d, want 0, 3", got.Used, got.Remaining)
	}
}

// testInspectLifetime: a lifetime budget shows what the run used and
// when its wall-clock cap passes, and a reset starts a new run.
func testInspectLifetime(t *testing.T, h Harness, in accounting.Inspector) {
	l := accounting.Limit{Name: "inspect-lifetime", Algorithm: accounting.Lifetime, Limit: 100, Window: time.Hour}
	c := l.Counter(nil)
	assertUsage(t, h, peek(t, in, c)[0], 0, 100, time.Hour)
	st := mustAdmit(t, h, c, 40)
	assertUsage(t, h, peek(t, in, c)[0], 40, st.Remaining, st.Reset)
	h.Advance(10 * time.Minute)
	st = mustReject(t, h, c, 61)
	assertUsage(t, h, peek(t, in, c)[0], 40, st.Remaining, st.Reset)
	assertDuration(t, h, "reset", st.Reset, 50*time.Minute)
	if existed, err := in.ResetCounter(context.Background(), c); err != nil || !existed {
		t.Fatalf("ResetCounter: got %v, %v, want true", existed, err)
	}
	assertUsage(t, h, peek(t, in, c)[0], 0, 100, time.Hour)
	mustAdmit(t, h, c, 100)
}
