package extproc

import "github.com/tokenwarden/tokenwarden/accounting"

// Basis is what a settlement's charge rests on. It is the value of the
// settled_on metadata field and of the basis label of
// tokenwarden_settlement_basis_total.
type Basis string

const (
	// BasisUsage is the usage the provider reported.
	BasisUsage Basis = "usage"
	// BasisEstimate is the input estimate plus the output observed in a
	// streamed response that reported no usage (cut short, or a provider
	// that reports none): what reached the client is what was generated,
	// give or take the chunk in flight.
	BasisEstimate Basis = "estimate"
	// BasisReserved keeps the whole reservation — the input estimate and
	// the output cap — where what was generated cannot be seen: no
	// response at all after the request was forwarded, a response that
	// ended before any of its body was seen (Envoy's 502 after an
	// upstream reset), a non-streamed reply cut short, an unreadable
	// encoding, hidden reasoning, a background response. The provider may have billed up to the cap,
	// and a limiter errs on the side of the budget.
	BasisReserved Basis = "reserved"
	// BasisRefused is an upstream's non-2xx reply: no tokens, no cost
	// (the requests dimension keeps its 1).
	BasisRefused Basis = "refused"
	// BasisRequest is a request that is not an LLM call: only the
	// requests dimension was reserved, and it stands.
	BasisRequest Basis = "request"
)

// origin is where a response came from.
type origin uint8

const (
	// fromUpstream: the provider's own reply.
	fromUpstream origin = iota
	// envoyAfterSend: Envoy's own reply after the request was (or may
	// have been) sent: a route timeout's 504, a reset after the request
	// was written. The provider may have generated and billed the call.
	envoyAfterSend
	// envoyNeverSent: Envoy's own reply for a request it never sent (no
	// connection to the upstream): nothing was billed.
	envoyNeverSent
)

// outcome is everything a settlement is decided on: what the request
// was, and what was seen of its response.
type outcome struct {
	// metered: an LLM API call, reserved on its estimate.
	metered bool
	// status is the response's :status; 0 when no response headers came.
	status int
	// origin says who generated the response.
	origin origin
	// complete: the response ended normally (its last message arrived),
	// rather than by a cut stream or a client that went away.
	complete bool
	// usage is the provider's report, when hasUsage; usageFinal says it
	// is the last one, not a running total a cut stream stopped short of.
	usage      accounting.Usage
	hasUsage   bool
	usageFinal bool
	// observed is the output counted in the response so far.
	observed int64
	// bodySeen: some of the response body reached the server.
	bodySeen bool
	// unreadable: a response encoding the server cannot decode.
	unreadable bool
	// streamed: the request asked for a streamed response, whose output
	// reaches the client as it is generated.
	streamed bool
	// hiddenReasoning: the model reasons without streaming its reasoning
	// in full (by the request, or by the model's family).
	hiddenReasoning bool
	// background: a Responses API background request.
	background bool
	// estimate is the reservation's estimate.
	estimate accounting.Estimate
}

// settlement decides what a finished request is charged, and on what
// basis. It is the whole settlement policy, apart from any transport.
func settlement(o outcome) (accounting.Usage, Basis) {
	reserved := accounting.Usage{InputTokens: o.estimate.InputTokens, OutputTokens: max(o.estimate.OutputTokens, o.observed)}
	switch {
	case !o.metered:
		return accounting.Usage{}, BasisRequest
	case o.status == 0 || o.origin == envoyAfterSend:
		// Forwarded, and no answer came back from the provider (the
		// client left first, or Envoy's own timeout or reset ended the
		// request): the provider may have generated, and billed, all of
		// it.
		return reserved, BasisReserved
	case o.status < 200 || o.status > 299 || o.origin == envoyNeverSent:
		return accounting.Usage{}, BasisRefused
	case !o.streamed && !o.complete:
		// A non-streamed reply is generated in full before its headers
		// are sent: a cut body says nothing about what was billed — not
		// even a usage object in it, which the cut may have truncated
		// mid-number ("prompt_tokens":1 of 17) or cut short of its
		// output count.
		return reserved, BasisReserved
	case !o.complete && !o.bodySeen:
		// The upstream began to answer and the response ended before
		// any of its body was seen (a reset while its headers were on
		// their way: Envoy answers 502 in their place; or the client
		// left between the headers and the first byte). Nothing shows
		// what was generated, as for a reset before the headers.
		return reserved, BasisReserved
	case o.hasUsage && !o.usageFinal && (o.hiddenReasoning || o.background):
		// A running total from a stream cut before its last report, for
		// a model whose reasoning the stream does not show: it may stop
		// far short of what is billed.
		u := o.usage.Clamp()
		u.OutputTokens = max(u.OutputTokens, o.estimate.OutputTokens)
		return u, BasisReserved
	case o.hasUsage:
		return o.usage.Clamp(), BasisUsage
	case o.unreadable, o.background, o.hiddenReasoning:
		// Background: the generation runs on after this reply, and its
		// usage is only on a later GET. Hidden reasoning: the reasoning
		// tokens never show in the stream.
		return reserved, BasisReserved
	}
	return accounting.Usage{InputTokens: o.estimate.InputTokens, OutputTokens: o.observed}.Clamp(), BasisEstimate
}
