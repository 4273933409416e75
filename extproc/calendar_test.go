package extproc_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// settableClock is a store clock a test sets.
type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *settableClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// TestCalendarDayHeadersAcrossDST sends requests through the test Envoy
// under a limit of one request per Berlin day, on both sides of the
// night clocks go forward (2026-03-29, a 23-hour day): the reset header
// and retry-after count to Berlin's next midnight, not to UTC's.
func TestCalendarDayHeadersAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	nextMidnight := time.Date(2026, 3, 30, 0, 0, 0, 0, berlin) // 22:00 UTC
	tests := []struct {
		name string
		at   time.Time
	}{
		{"before the change", time.Date(2026, 3, 29, 1, 30, 0, 0, berlin)},
		{"after the change", time.Date(2026, 3, 29, 3, 30, 0, 0, berlin)},
		{"the evening, in summer time", time.Date(2026, 3, 29, 23, 0, 0, 0, berlin)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &settableClock{now: tt.at}
			perDay := accounting.Limit{Name: "berlin-daily", Dimension: accounting.Requests, Scope: []string{"tenant"},
				Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay, Window: 24 * time.Hour, Limit: 1, Location: berlin}
			r := newRig(t, []accounting.Limit{perDay}, withStore(memstore.New(memstore.Options{Now: clock.Now})))
			want := nextMidnight.Sub(tt.at)

			resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
				jsonUpstream(200, fixture(t, "openai/chat_response.json")))
			wantStatus(t, resp, 200)
			wantHeader(t, resp.Header, "x-ratelimit-reset-requests", want.String())

			resp = r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
				jsonUpstream(200, fixture(t, "openai/chat_response.json")))
			wantStatus(t, resp, 429)
			wantHeader(t, resp.Header, "retry-after", strconv.Itoa(int(want/time.Second)))
			if msg := decodeError(t, resp.Body).Error.Message; !strings.Contains(msg, "per calendar day in Europe/Berlin") {
				t.Errorf("message %q does not name the Berlin day", msg)
			}

			// Berlin's midnight: the budget is back.
			clock.set(nextMidnight)
			resp = r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
				jsonUpstream(200, fixture(t, "openai/chat_response.json")))
			wantStatus(t, resp, 200)
			wantHeader(t, resp.Header, "x-ratelimit-reset-requests", (24 * time.Hour).String())
		})
	}
}
