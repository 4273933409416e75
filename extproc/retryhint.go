package extproc

import (
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// DefaultShouldRetryMax is the longest wait a 429 invites a client to
// retry after, when Options.ShouldRetryMax is zero.
//
// The figure is the SDKs' (TestSDKsOnRetryHints drives the ones in
// go.mod): openai-go waits a 429's retry-after-ms (or retry-after) up
// to two minutes and gives up on a longer one; anthropic-sdk-go waits
// whatever it says, a day included. Both obey x-should-retry: "false"
// stops the retries. Two minutes lets the OpenAI SDKs wait out every
// wait they would take, a per-minute window's first refusal among them
// (a sliding window frees in tenths of it: up to 66 s), and keeps the
// Anthropic SDKs from blocking a call for hours on a daily limit: a
// longer wait is told as "do not retry" with the time the limit resets,
// which a caller's own code can act on. SDKs that wait only up to a
// minute (OpenAI's Node, Anthropic's Python) retry a wait between one
// and two minutes early on their own backoff, and get the same 429.
const DefaultShouldRetryMax = 2 * time.Minute

// shouldRetry reports whether a 429 for t invites the client to retry:
// always when requests in flight hold its shortfall (their settlements
// may leave room at any moment); not when waiting cannot help (the
// request never fits the limit, or a run's lifetime budget tripped), nor
// when the wait is longer than maxWait (zero means
// DefaultShouldRetryMax; negative means no wait is too long).
func shouldRetry(t *accounting.Trip, maxWait time.Duration) bool {
	switch {
	case t.Settling:
		return true
	case t.NeverFits, t.Final:
		return false
	case maxWait == 0:
		maxWait = DefaultShouldRetryMax
	case maxWait < 0:
		return true
	}
	return t.RetryAfter <= maxWait
}

// resetAt is the time after, from now, rounded up to the whole second an
// RFC 3339 time names: a client that waits until then for a limit to
// have room is not refused by it for want of a millisecond.
func resetAt(after time.Duration, now time.Time) time.Time {
	at := now.Add(after)
	if r := at.Truncate(time.Second); !r.Equal(at) {
		at = r.Add(time.Second)
	}
	return at.UTC()
}
