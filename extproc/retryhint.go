package extproc

import (
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// DefaultShouldRetryMax is the longest wait a 429 invites a client to
// retry after, when Options.ShouldRetryMax is zero.
//
// The figure is the SDKs': the OpenAI (Python and Node) and Anthropic
// SDKs take a 429's retry-after-ms or retry-after only when it is at
// most a minute. A longer one they drop, and retry on their own short
// backoff instead (well under ten seconds between tries), spending every
// retry they have against a limit that frees in an hour. All three obey
// x-should-retry, though: "false" stops the retries, whatever the
// status. So a wait past what the SDKs honour is told as "do not retry"
// with the time the limit resets, which a caller's own code can act on.
const DefaultShouldRetryMax = time.Minute

// shouldRetry reports whether a 429 for t invites the client to retry:
// not when waiting cannot help (the request never fits the limit, or a
// run's lifetime budget tripped), nor when the wait is longer than
// maxWait (zero means DefaultShouldRetryMax; negative means no wait is
// too long).
func shouldRetry(t *accounting.Trip, maxWait time.Duration) bool {
	switch {
	case t.NeverFits, t.Final:
		return false
	case maxWait == 0:
		maxWait = DefaultShouldRetryMax
	case maxWait < 0:
		return true
	}
	return t.RetryAfter <= maxWait
}

// resetAt is when the limit t tripped on has room for the request again,
// at now, rounded up to the whole second an RFC 3339 time names: a client
// that waits until then is not refused by this limit for want of a
// millisecond.
func resetAt(t *accounting.Trip, now time.Time) time.Time {
	at := now.Add(t.RetryAfter)
	if r := at.Truncate(time.Second); !r.Equal(at) {
		at = r.Add(time.Second)
	}
	return at.UTC()
}
