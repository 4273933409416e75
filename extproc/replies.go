package extproc

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// setHeader returns a header mutation entry that replaces any existing
// value. Envoy reads only raw_value, and honours only the deprecated
// append flag (unset means overwrite), not append_action.
func setHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)}}
}

// formatAmount renders an amount of a dimension: cost in USD with six
// decimals (micro-dollar precision), others as integers.
func formatAmount(d accounting.Dimension, v int64) string {
	var b [24]byte
	return string(appendAmount(b[:0], d, v))
}

// appendAmount appends formatAmount(d, v) to dst.
func appendAmount(dst []byte, d accounting.Dimension, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = -u
	}
	if d != accounting.Cost {
		return appendDecimal(dst, u)
	}
	dst = appendDecimal(dst, u/1e6)
	frac := u % 1e6
	return append(dst, '.',
		byte('0'+frac/1e5), byte('0'+frac/1e4%10), byte('0'+frac/1e3%10),
		byte('0'+frac/100%10), byte('0'+frac/10%10), byte('0'+frac%10))
}

// appendDecimal appends u in decimal, as strconv.AppendUint(dst, u, 10)
// does, in one append: the x-ratelimit-* figures of every response are
// written with it.
func appendDecimal(dst []byte, u uint64) []byte {
	var buf [20]byte
	i := len(buf) - 1
	for u >= 10 {
		buf[i] = byte('0' + u%10)
		u /= 10
		i--
	}
	buf[i] = byte('0' + u)
	return append(dst, buf[i:]...)
}

// immediate builds a local reply: Envoy sends it to the client in place of
// the upstream's response and closes the stream.
func immediate(api errorShape, e llm.Error, details string, headers []*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	if api == nil {
		api = openaiShape{}
	}
	reply := api.RenderError(e)
	headers = append(headers, setHeader("content-type", "application/json"))
	for _, h := range reply.Headers {
		headers = append(headers, setHeader(h[0], h[1]))
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocv3.ImmediateResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.Kind.Status())},
				Headers: &extprocv3.HeaderMutation{SetHeaders: headers},
				Body:    reply.Body,
				Details: details,
			},
		},
	}
}

// rejection renders the 429 for a reservation that did not fit, at
// now. extra are further rate-limit headers to set (the IETF and
// Anthropic families, as configured); maxWait is Options.ShouldRetryMax.
//
// A 429 the client should not retry (see [shouldRetry]) carries
// x-should-retry: false, which the OpenAI and Anthropic SDKs obey. One
// that has a retry time (not a request too large for the limit, nor a
// run's spent budget) carries it in retry-after, retry-after-ms and, as an
// RFC 3339 time, x-tokenwarden-reset-at: the reset of the limit, or, when
// requests in flight hold the shortfall, the short retry that their
// settlements may make room by (accounting.InFlightRetryAfter).
func rejection(api errorShape, r *accounting.Reservation, extra []*corev3.HeaderValueOption, now time.Time, maxWait time.Duration) *extprocv3.ProcessingResponse {
	t := &r.Trip
	d := t.Limit.Dimension
	headers := rateLimitHeaders(&r.Dims, make([]*corev3.HeaderValueOption, 0, 3*numDims+8))
	headers = append(headers, extra...)
	headers = append(headers, setHeader("x-tokenwarden-limit", t.Limit.Name))
	retry := shouldRetry(t, maxWait)
	if !retry {
		headers = append(headers, setHeader("x-should-retry", "false"))
	}
	var msg string
	code := "rate_limit_exceeded"
	if t.Limit.Algorithm == accounting.Lifetime {
		// Every refusal of a run's budget, a request larger than the
		// whole budget included.
		code = "run_budget_exceeded"
	}
	switch {
	case t.Final:
		// A lifetime budget never frees: retrying cannot help.
		msg = runOverMessage(t)
	case t.NeverFits:
		msg = fmt.Sprintf("Request too large for limit %s on %s: it needs %s but the limit allows at most %s%s. Retrying will not help: reduce the input or the output cap.",
			t.Limit.Name, d, formatAmount(d, t.Requested), formatAmount(d, t.Limit.Capacity()), per(t.Limit))
	default:
		secs := int64(math.Ceil(t.RetryAfter.Seconds()))
		ms := int64(math.Ceil(float64(t.RetryAfter) / float64(time.Millisecond)))
		at := resetAt(t.RetryAfter, now).Format(time.RFC3339)
		headers = append(headers,
			setHeader("retry-after", strconv.FormatInt(max(secs, 1), 10)),
			setHeader("retry-after-ms", strconv.FormatInt(max(ms, 1), 10)),
			setHeader("x-tokenwarden-reset-at", at))
		switch {
		case t.Limit.Algorithm == accounting.Lifetime:
			// Settling: the run's own requests in flight hold it.
			msg = runOverMessage(t) + " " + settlingNote(t, now)
		case t.Settling:
			msg = limitReached(t) + settlingNote(t, now)
		case retry:
			msg = limitReached(t) + "Please try again in " + formatReset(t.RetryAfter) + "."
		default:
			msg = limitReached(t) + "The limit has room again at " + at + " (in " + formatReset(t.RetryAfter) + "): do not retry before then."
		}
	}
	return immediate(api, llm.Error{Kind: llm.RateLimited, Dimension: d.String(), Code: code, Message: msg},
		"tokenwarden_rate_limited", headers)
}

// limitReached begins the message of a refusal that a wait may end.
func limitReached(t *accounting.Trip) string {
	d := t.Limit.Dimension
	return fmt.Sprintf("Rate limit reached for limit %s on %s: limit %s%s, remaining %s, requested %s. ",
		t.Limit.Name, d, formatAmount(d, t.Limit.Capacity()), per(t.Limit), formatAmount(d, max(0, t.Remaining)),
		formatAmount(d, t.Requested))
}

// settlingNote ends the message of a refusal whose shortfall requests in
// flight hold (Trip.Settling): they may give it back, or not.
func settlingNote(t *accounting.Trip, now time.Time) string {
	held := formatAmount(t.Limit.Dimension, t.InFlight)
	s := "Requests still in flight hold " + held + " of it and give back what they do not use when they end: please try again in " + formatReset(t.RetryAfter) + "."
	if t.Limit.Algorithm != accounting.Lifetime {
		s += " If they use all of it, the limit has room again at " + resetAt(t.FreesAfter, now).Format(time.RFC3339) +
			" (in " + formatReset(t.FreesAfter) + ")."
	}
	return s
}

// per describes a limit's window for messages.
func per(l *accounting.Limit) string {
	switch {
	case l.Algorithm == accounting.Lifetime:
		return fmt.Sprintf(" per run (of at most %s)", l.Window)
	case l.Dimension == accounting.Concurrent:
		// Requests in flight at once; when one ends is not known, so
		// the retry-after is accounting.ConcurrentRetryAfter.
		return " in flight at once"
	case l.Calendar != accounting.NoCalendar:
		return " per " + l.CalendarName()
	case l.Algorithm == accounting.TokenBucket:
		return fmt.Sprintf(" (refilling %s per %s)", formatAmount(l.Dimension, l.Limit), l.Window)
	}
	return " per " + l.Window.String()
}

func unavailable(api errorShape) *extprocv3.ProcessingResponse {
	return immediate(api, llm.Error{Kind: llm.Unavailable, Code: "limiter_unavailable",
		Message: "The rate limiter is unavailable, so the request cannot be admitted. Please try again shortly."},
		"tokenwarden_limiter_unavailable", []*corev3.HeaderValueOption{setHeader("retry-after", "1")})
}

func badRequest(api llm.API, msg string) *extprocv3.ProcessingResponse {
	return immediate(api, llm.Error{Kind: llm.InvalidRequest, Code: "invalid_request", Message: msg},
		"tokenwarden_bad_request", nil)
}

func unauthenticated(api llm.API, msg string) *extprocv3.ProcessingResponse {
	return immediate(api, llm.Error{Kind: llm.Unauthenticated, Code: "missing_identity", Message: msg},
		"tokenwarden_missing_identity", nil)
}

// misconfigured refuses a metered request that the filter's processing
// mode would let past the limiter (its body is not sent, or not in a
// mode tokenwarden can hold back): a misconfigured filter must fail
// closed and say why, not pass unmetered traffic.
func misconfigured(api llm.API, why string) *extprocv3.ProcessingResponse {
	return immediate(api, llm.Error{Kind: llm.Unavailable, Code: "limiter_misconfigured",
		Message: "The rate limiter cannot meter this request: " + why + "."},
		"tokenwarden_misconfigured", nil)
}

// refusedFamily refuses a request of an unmetered path family the
// options do not allow: what it spends cannot be reserved (see
// families.go).
func refusedFamily(f *family, shape errorShape) *extprocv3.ProcessingResponse {
	return immediate(shape, llm.Error{Kind: llm.Forbidden, Code: "unmetered_api_refused", Message: familyRefusal(f)},
		"tokenwarden_unmetered_refused", nil)
}

// familyRefusal is the message of refusedFamily.
func familyRefusal(f *family) string {
	return "This proxy meters what each call spends, and cannot meter " + f.name + " calls, so it refuses them. " +
		"An operator can allow them with unmetered_apis: {" + f.name + ": allow} in tokenwarden's config."
}

// unmetered refuses a response to a metered request whose body never
// completed before the response began: the request was never reserved,
// so its answer must not reach the client.
func unmetered(api llm.API) *extprocv3.ProcessingResponse {
	return immediate(api, llm.Error{Kind: llm.InvalidRequest, Code: "invalid_request",
		Message: "The request body did not complete before the response began, so the request could not be metered."},
		"tokenwarden_unmetered", nil)
}
