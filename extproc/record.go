package extproc

import (
	"log/slog"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// maxRequestIDBytes bounds the request id a settlement's record carries:
// Envoy's own are UUIDs, but a client's kept by
// preserve_external_request_id may be as long as a header.
const maxRequestIDBytes = 128

// logSettled writes the settlement's record, the line operators
// reconcile spend against: one per admitted request, keyed by Envoy's
// x-request-id (the access log's request_id), with what was reserved and
// what was booked. Envoy's access log carries the same figures only for
// a response that ended normally: a stream cut by the client or the
// upstream ends the ext_proc stream, and with it any way to send Envoy
// metadata, before tokenwarden settles (see docs/operations.md).
//
// cost is the settled cost in micro-dollars when priced.
func (st *stream) logSettled(r *accounting.Reservation, usage accounting.Usage, basis Basis, complete bool, cost int64, priced bool) {
	id := st.requestID
	if len(id) > maxRequestIDBytes {
		id = id[:maxRequestIDBytes]
	}
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs,
		slog.String("request_id", id),
		slog.String("reservation", r.ID),
		slog.String("api", apiName(st.target.api)),
	)
	if st.target.api != nil {
		attrs = append(attrs, slog.String("model", boundedModel(st.req.Model)))
	}
	if st.dg.from != "" {
		attrs = append(attrs, slog.String("downgraded_from", boundedModel(st.dg.from)))
	}
	if r.Wait.Outcome != "" {
		attrs = append(attrs, slog.Float64("wait_seconds", r.Wait.Took.Seconds()))
	}
	attrs = append(attrs,
		slog.Int("status", st.status),
		slog.Bool("complete", complete),
		slog.String("basis", string(basis)),
		slog.Int64("estimate_tokens", r.Estimate.Total()),
		slog.String("estimate_cost", formatAmount(accounting.Cost, r.Cost)),
		slog.Int64("actual_input_tokens", usage.InputTokens),
		slog.Int64("actual_output_tokens", usage.OutputTokens),
		slog.Int64("actual_tokens", usage.Total()),
	)
	if priced {
		attrs = append(attrs, slog.String("settled_cost", formatAmount(accounting.Cost, cost)))
	}
	st.s.log.LogAttrs(st.ctx, slog.LevelInfo, "settled", attrs...)
}
