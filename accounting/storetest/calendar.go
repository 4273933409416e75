package storetest

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// nextZoneChange returns the first daylight-saving change in loc after t.
func nextZoneChange(t *testing.T, loc *time.Location, after time.Time) time.Time {
	t.Helper()
	_, end := after.In(loc).ZoneBounds()
	if end.IsZero() {
		t.Fatalf("%s has no zone change after %v", loc, after)
	}
	return end
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("time zone %s: %v", name, err)
	}
	return loc
}

// midnight returns the start of the calendar day in loc that holds t.
func midnight(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// testCalendarDayAcrossDST runs a calendar day in Europe/Berlin across
// the next two daylight-saving changes (a 23-hour and a 25-hour day, in
// either order): the budget returns at local midnight, and reset and
// retry-after count to it, on both sides of the change.
func testCalendarDayAcrossDST(t *testing.T, h Harness) {
	berlin := mustLoad(t, "Europe/Berlin")
	l := accounting.Limit{Name: "berlin-day", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay,
		Window: 24 * time.Hour, Limit: 1000, Location: berlin}
	c := l.Counter(nil)
	lengths := map[time.Duration]bool{}
	for range 2 {
		change := nextZoneChange(t, berlin, h.Now())
		start := midnight(change, berlin)
		end := midnight(start.Add(26*time.Hour), berlin)
		lengths[end.Sub(start)] = true

		// 10s before the day of the change: the old day's last seconds.
		h.Advance(start.Add(-10 * time.Second).Sub(h.Now()))
		st := mustAdmit(t, h, c, 900)
		assertDuration(t, h, "reset before the day", st.Reset, 10*time.Second)
		st = mustReject(t, h, c, 200)
		assertDuration(t, h, "retry-after before the day", st.RetryAfter, 10*time.Second)

		// Local midnight: the whole budget again, until the next one.
		h.Advance(10 * time.Second)
		st = mustAdmit(t, h, c, 600)
		assertDuration(t, h, "reset at midnight", st.Reset, end.Sub(start))

		// An hour after the change, on its other side.
		h.Advance(change.Add(time.Hour).Sub(h.Now()))
		st = mustReject(t, h, c, 500)
		assertRemaining(t, st, 400)
		assertDuration(t, h, "retry-after after the change", st.RetryAfter, end.Sub(change.Add(time.Hour)))

		// The next midnight.
		h.Advance(end.Sub(h.Now()))
		st = mustAdmit(t, h, c, 1000)
		assertDuration(t, h, "reset the next day", st.Reset, midnight(end.Add(25*time.Hour), berlin).Sub(end))
		h.Advance(time.Hour)
	}
	if !lengths[23*time.Hour] || !lengths[25*time.Hour] {
		t.Errorf("days of the changes: got lengths %v, want a 23-hour and a 25-hour day", lengths)
	}
}

// testCalendarMonthInAZone runs a calendar month in America/New_York
// over a month boundary: the budget returns at local midnight of the
// first, not at UTC's.
func testCalendarMonthInAZone(t *testing.T, h Harness) {
	newYork := mustLoad(t, "America/New_York")
	l := accounting.Limit{Name: "ny-month", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth,
		Limit: 1000, Location: newYork}
	c := l.Counter(nil)
	now := h.Now().In(newYork)
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, newYork)
	following := time.Date(now.Year(), now.Month()+2, 1, 0, 0, 0, 0, newYork)

	// UTC's month has turned (New York is behind UTC); New York's has not.
	utcFirst := time.Date(next.Year(), next.Month(), 1, 0, 0, 0, 0, time.UTC)
	h.Advance(utcFirst.Add(time.Second).Sub(h.Now()))
	st := mustAdmit(t, h, c, 900)
	assertDuration(t, h, "reset after UTC's month turned", st.Reset, next.Sub(utcFirst.Add(time.Second)))
	st = mustReject(t, h, c, 200)
	assertDuration(t, h, "retry-after", st.RetryAfter, next.Sub(utcFirst.Add(time.Second)))

	h.Advance(next.Sub(h.Now()))
	st = mustAdmit(t, h, c, 1000)
	assertDuration(t, h, "reset in the new month", st.Reset, following.Sub(next))
}

// testZonedSettleAndRelease settles and releases on a calendar day in a
// time zone, before and after its window turns, as on any fixed window.
func testZonedSettleAndRelease(t *testing.T, h Harness) {
	tokyo := mustLoad(t, "Asia/Tokyo")
	l := accounting.Limit{Name: "tokyo-day", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay,
		Window: 24 * time.Hour, Limit: 100, Location: tokyo}
	c := l.Counter(nil)
	end := midnight(h.Now(), tokyo).Add(24 * time.Hour)
	h.Advance(end.Add(-time.Minute).Sub(h.Now()))

	res, req := reserve(t, h, item(c, 80))
	if !res.Admitted {
		t.Fatal("rejected")
	}
	settle(t, h, req, res, 30) // a refund in the same day
	res, req = reserve(t, h, item(c, 70))
	if !res.Admitted {
		t.Fatalf("70 after a refund to 30: rejected, remaining %d", res.States[0].Remaining)
	}
	release(t, h, req, true)
	assertRemaining(t, mustReject(t, h, c, 71), 70)

	res, req = reserve(t, h, item(c, 70))
	if !res.Admitted {
		t.Fatal("rejected")
	}
	h.Advance(2 * time.Minute) // Tokyo's next day
	settle(t, h, req, res, 90) // an extra charge lands on the new day
	assertRemaining(t, mustReject(t, h, c, 81), 80)
}
