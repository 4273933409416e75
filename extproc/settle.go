package extproc

import (
	"log/slog"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// finish settles a reservation the stream did not: the client went away,
// the upstream failed, or Envoy closed the stream early.
func (st *stream) finish() {
	st.settle(false, nil)
}

// settle books the request's real usage, once, on the basis settlement
// decides. complete says whether the response ended normally; then the
// actual figures are added to md (when not nil) for Envoy's access logs,
// and settle reports that it added them.
func (st *stream) settle(complete bool, md *dynamicMetadata) bool {
	if st.decoder != nil {
		// Flush what the decompressor holds back, and release it, on
		// every path that ends the response.
		_ = st.decoder.Close()
	}
	r := st.res
	if r == nil || r.Settled() {
		return false
	}
	o := outcome{
		metered:    st.target.api != nil,
		status:     st.status,
		origin:     st.origin,
		complete:   complete,
		unreadable: st.unreadable,
		streamed:   st.req.Stream,
		background: st.req.Background,
		// The estimate on the output cap, which a learned reservation
		// may hold less than: a request settled without a usage report
		// is charged as if nothing were learned.
		estimate: st.req.Estimate(),
	}
	if st.reader != nil {
		o.usage, o.hasUsage = st.reader.Usage()
		o.usageFinal = st.reader.Final()
		o.observed = st.reader.ObservedOutputTokens()
	}
	o.bodySeen = st.bodySeen
	// Matching the model against the hidden-reasoning patterns is left
	// out when the provider reported usage, which settles the request
	// whatever the model.
	o.hiddenReasoning = st.req.HiddenReasoning || !o.hasUsage && st.s.hiddenReasoning(st.req.Model)
	usage, basis := settlement(o)
	st.learn(usage, basis, o.usageFinal)
	start := st.traceClock()
	var err error
	if st.hasProvider {
		_, err = r.SettleProvider(st.ctx, usage, st.provider)
	} else {
		_, err = r.Settle(st.ctx, usage)
	}
	if err != nil {
		st.s.log.Warn("settlement failed; retrying in the background", "reservation", r.ID, "err", err)
	}
	if st.s.tracer != nil {
		st.traceSettlement(start, r, usage, basis, complete, err)
	}
	st.s.m.settled(basis)
	cost, priced := r.UsageCost(usage)
	if st.s.log.Enabled(st.ctx, slog.LevelInfo) {
		// Checked first: the arguments alone would cost allocations on
		// every request.
		st.logSettled(r, usage, basis, complete, cost, priced)
	}
	if st.target.api != nil {
		st.s.m.tokensActual(st.target.api.Name(), usage.Total())
	}
	if !complete || md == nil {
		return false
	}
	// Envoy merges these into the fields written at admission.
	md.num(MetaActualInputTokens, float64(usage.InputTokens))
	md.num(MetaActualOutputTokens, float64(usage.OutputTokens))
	md.num(MetaActualTokens, float64(usage.Total()))
	md.known(MetaSettledOn, string(basis))
	if priced {
		md.known(MetaSettledCost, formatAmount(accounting.Cost, cost))
	}
	return true
}

// reservationMetadata adds the reservation's fields to md: its ID, the
// estimate, and the API and model of an LLM call.
func (st *stream) reservationMetadata(md *dynamicMetadata) {
	r := st.res
	md.known(MetaReservation, r.ID)
	md.num(MetaEstimateTokens, float64(r.Estimate.Total()))
	md.known(MetaEstimateCost, formatAmount(accounting.Cost, r.Cost))
	if st.target.api != nil {
		md.known(MetaAPI, st.target.api.Name())
		md.str(MetaModel, boundedModel(st.req.Model))
	}
}
