package extproc

import (
	"log/slog"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// finish ends the stream: it gives back what its request body is still
// charged, and settles a reservation the stream did not (the client went
// away, the upstream failed, or Envoy closed the stream early).
func (st *stream) finish() {
	st.releaseBody()
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
	if o.hasUsage {
		o.usage = st.plausible(r.ID, o.usage, o.usageFinal, o.observed)
	}
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

// plausible holds a usage report to what the request could have
// produced (llm.Request.UsageBound: its model's context window, the cap
// it was sent): a report beyond that is charged at the bound, logged and
// counted. One absurd report ("prompt_tokens": 1e30) must not charge a
// tenant more than any real call could cost. A running total that is
// not final carries the output observed in the stream where that is
// more (see llm.UsageReader): output beyond the bound that is only the
// observed estimate's is bounded too, but not counted as a report.
func (st *stream) plausible(reservation string, u accounting.Usage, final bool, observed int64) accounting.Usage {
	bound := st.req.UsageBound(st.capSent, st.s.contextWindow(st.req.Model))
	within, beyond := u.Within(bound)
	if beyond && (final || u.InputTokens > bound.InputTokens || u.OutputTokens > observed) {
		api := apiName(st.target.api)
		st.s.m.implausible.WithLabelValues(api).Inc()
		st.s.log.Warn("usage report beyond what the request could produce; charged at the bound",
			"reservation", reservation, "api", api, "model", boundedModel(st.req.Model),
			"reported_input_tokens", u.InputTokens, "reported_output_tokens", u.OutputTokens,
			"bound_input_tokens", bound.InputTokens, "bound_output_tokens", bound.OutputTokens)
	}
	return within
}

// contextWindow is model's context window (Options.ContextWindows).
func (s *Server) contextWindow(model string) int64 {
	if len(s.opts.ContextWindows) == 0 {
		return DefaultContextWindow
	}
	key, how := accounting.ResolveModel(s.opts.ContextWindows, model)
	if how == accounting.NoPrice {
		return DefaultContextWindow
	}
	return s.opts.ContextWindows[key]
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
