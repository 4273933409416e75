package extproc_test

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// TestLongWaitReply: a 429 whose limit frees later than ShouldRetryMax
// tells the SDKs not to retry (x-should-retry: false), and says when to
// come back: retry-after and retry-after-ms as ever, the RFC 3339 time in
// x-tokenwarden-reset-at, and the same time in the message. One that
// frees sooner invites the retry as before.
func TestLongWaitReply(t *testing.T) {
	small := []byte(`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)
	tests := []struct {
		name    string
		maxWait time.Duration
		limit   accounting.Limit
		wait    time.Duration // at the store's half-past clock
		retry   bool
	}{
		{"an hour's window, default max", 0, tokensLimit("hourly", 1500, "tenant"), 30 * time.Minute, false},
		{"an hour's window, a ten-minute max", 10 * time.Minute, tokensLimit("hourly", 1500, "tenant"), 30 * time.Minute, false},
		{"an hour's window, an hour's max", time.Hour, tokensLimit("hourly", 1500, "tenant"), 30 * time.Minute, true},
		{"an hour's window, no max", -1, tokensLimit("hourly", 1500, "tenant"), 30 * time.Minute, true},
		// 709 tokens short, at 750 a second.
		{"a bucket refilling in two seconds, default max", 0, accounting.Limit{Name: "burst", Dimension: accounting.Tokens, Scope: []string{"tenant"},
			Algorithm: accounting.TokenBucket, Limit: 1500, Window: 2 * time.Second}, 945333 * time.Microsecond, true},
	}
	// The store's clock stands still at half past an hour, so the waits
	// are known; the reply's clock is the real one.
	halfPast := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tt.limit}, withServer(func(o *extproc.Options) { o.ShouldRetryMax = tt.maxWait }),
				withStore(memstore.New(memstore.Options{Now: func() time.Time { return halfPast }})))
			before := time.Now()
			// 1200 tokens used leave 300, too few for the next 1009.
			wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", small),
				jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":200,"completion_tokens":1000,"total_tokens":1200}}`))), 200)
			resp := r.envoy.Do(t.Context(), chatRequest("a", small), nil)
			after := time.Now()
			wantStatus(t, resp, 429)
			wantHeader(t, resp.Header, "x-tokenwarden-limit", tt.limit.Name)
			if tt.retry {
				if v := resp.Header.Values("x-should-retry"); len(v) != 0 {
					t.Errorf("x-should-retry: got %q, want none: the limit frees within the max", v)
				}
			} else {
				wantHeader(t, resp.Header, "x-should-retry", "false")
			}
			wantHeader(t, resp.Header, "retry-after", strconv.FormatInt(int64(math.Ceil(tt.wait.Seconds())), 10))
			wantHeader(t, resp.Header, "retry-after-ms", strconv.FormatInt(int64(math.Ceil(float64(tt.wait)/1e6)), 10))
			// The reset is the wait from the reply's clock, rounded up to a
			// whole second.
			at, err := time.Parse(time.RFC3339, resp.Header.Get("x-tokenwarden-reset-at"))
			lo, hi := before.Add(tt.wait), after.Add(tt.wait+time.Second)
			if err != nil || at.Before(lo) || at.After(hi) {
				t.Errorf("x-tokenwarden-reset-at: got %q (%v), want an RFC 3339 time in [%s, %s]",
					resp.Header.Get("x-tokenwarden-reset-at"), err, lo.UTC().Format(time.RFC3339Nano), hi.UTC().Format(time.RFC3339Nano))
			}
			e := decodeError(t, resp.Body)
			if e.Error.Code != "rate_limit_exceeded" {
				t.Errorf("error code: got %q, want rate_limit_exceeded", e.Error.Code)
			}
			want := "try again in"
			if !tt.retry {
				want = "room again at " + resp.Header.Get("x-tokenwarden-reset-at")
			}
			if !strings.Contains(e.Error.Message, want) {
				t.Errorf("message %q does not say %q", e.Error.Message, want)
			}
		})
	}
}

// TestLongWaitStoreDown: a store that fails leaves no limit tripped and
// no reset to name. Under a limit that fails closed the reply is the
// 503 with retry-after: 1, which invites a retry (no x-should-retry:
// false, no x-tokenwarden-reset-at), whatever ShouldRetryMax says.
func TestLongWaitStoreDown(t *testing.T) {
	store := &failAfter{Store: memstore.New(memstore.Options{})} // answers none
	r := newRig(t, []accounting.Limit{tokensLimit("hourly", 1500, "tenant")}, withStore(store),
		withServer(func(o *extproc.Options) { o.ShouldRetryMax = time.Second }))
	resp := r.envoy.Do(t.Context(), chatRequest("a", []byte(`{"model":"gpt-4o-mini","max_tokens":10,"messages":[]}`)), nil)
	wantStatus(t, resp, 503)
	wantHeader(t, resp.Header, "retry-after", "1")
	for _, h := range []string{"x-should-retry", "x-tokenwarden-reset-at"} {
		if v := resp.Header.Values(h); len(v) != 0 {
			t.Errorf("%s on a 503 of a failed store: %q", h, v)
		}
	}
}

// TestMinuteWindowFirstRefusalInvitesRetry: the first refusal after a
// burst that fills a per-minute sliding window waits for the burst's
// slot to leave the window: a minute and up to a tenth of one more
// (60.13 s to 65.73 s by where in its slot the burst fell). At the
// default should_retry_max it invites the retry that the SDKs wait out,
// never x-should-retry: false.
func TestMinuteWindowFirstRefusalInvitesRetry(t *testing.T) {
	lim := accounting.Limit{Name: "free-tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Algorithm: accounting.SlidingWindow, Limit: 5, Window: time.Minute}
	slot := time.Minute / accounting.SlidingSlots
	for _, into := range []time.Duration{270 * time.Millisecond, 3 * time.Second, 5870 * time.Millisecond} {
		t.Run(into.String()+" into a slot", func(t *testing.T) {
			at := time.UnixMicro(1_790_000_000_000_000 / slot.Microseconds() * slot.Microseconds()).Add(into)
			r := newRig(t, []accounting.Limit{lim}, withStore(memstore.New(memstore.Options{Now: func() time.Time { return at }})))
			body := []byte(`{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
			ok := jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
			for range 5 {
				wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", body), ok), 200)
			}
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), ok)
			wantStatus(t, resp, 429)
			wantHeader(t, resp.Header, "retry-after-ms", strconv.FormatInt((time.Minute+slot-into).Milliseconds(), 10))
			if v := resp.Header.Values("x-should-retry"); len(v) != 0 {
				t.Errorf("x-should-retry: got %q, want none: the SDKs wait a minute's refusal out", v)
			}
		})
	}
}
