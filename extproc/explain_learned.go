package extproc

import (
	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// LearnedExplanation is what learned output estimates
// (estimation.learned_output) make of a request's output reservation,
// for "tokenwarden estimate".
type LearnedExplanation struct {
	// Quantile and MinSamples are the configured ones.
	Quantile   float64
	MinSamples int64
	// Samples is how many completions of the request's model and API
	// this server has learned from; OutputTokens is their estimate per
	// choice, zero while Samples is below MinSamples. Estimates are
	// learned per replica, in memory: a server that has served nothing
	// yet (the estimate command's own) has none.
	Samples      int64
	OutputTokens int64
	// Scoped reports estimates kept per scope attributes, which Explain
	// does not read: the figures above are those of requests without
	// them.
	Scoped bool
	// CapEstimate is the estimate on the output cap alone, which the
	// server reserves until it has learned, and charges a request whose
	// response reports no usage.
	CapEstimate accounting.Estimate
}

// explainLearned returns what learning makes of est, req's estimate on
// its cap: the explanation (nil when learning is off or req has no
// output), and the estimate the server reserves. It counts nothing.
func (s *Server) explainLearned(req *llm.Request, api string, est accounting.Estimate) (*LearnedExplanation, accounting.Estimate) {
	l := s.learned
	if l == nil || req.OutputCap <= 0 || req.Background {
		return nil, est
	}
	k, keyed := l.key(api, accounting.ModelFamily(req.Model), nil)
	e := &LearnedExplanation{Quantile: l.opts.Quantile, MinSamples: l.opts.MinSamples, Scoped: len(l.opts.Scope) > 0, CapEstimate: est}
	if !keyed {
		// An explanation has no identity: a scoped estimate is never
		// one it can name, and the request reserves its cap.
		return e, est
	}
	tokens, samples, ok := l.est.Estimate(k)
	e.Samples = samples
	if ok {
		e.OutputTokens = tokens
	}
	if per, use := l.reserve(k, req.OutputCap); use == useLearned {
		r := *req
		r.OutputCap = per
		est = r.Estimate()
	}
	return e, est
}
