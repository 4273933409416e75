package extproc

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// finish settles a reservation the stream did not: the client went away,
// the upstream failed, or Envoy closed the stream early.
func (st *stream) finish() {
	st.settle(false)
}

// settle books the request's real usage, once, on the basis settlement
// decides. complete says whether the response ended normally. It returns
// the dynamic metadata to report.
func (st *stream) settle(complete bool) *structpb.Struct {
	if st.decoder != nil {
		// Flush what the decompressor holds back, and release it, on
		// every path that ends the response.
		_ = st.decoder.Close()
	}
	r := st.res
	if r == nil || r.Settled() {
		return nil
	}
	o := outcome{
		metered:         st.target.api != nil,
		status:          st.status,
		origin:          st.origin,
		complete:        complete,
		unreadable:      st.unreadable,
		streamed:        st.req.Stream,
		hiddenReasoning: st.req.HiddenReasoning || st.s.hiddenReasoning(st.req.Model),
		background:      st.req.Background,
		estimate:        r.Estimate,
	}
	if st.reader != nil {
		o.usage, o.hasUsage = st.reader.Usage()
		o.observed = st.reader.ObservedOutputTokens()
	}
	usage, basis := settlement(o)
	if _, err := r.Settle(st.ctx, usage); err != nil {
		st.s.log.Warn("settlement failed; retrying in the background", "reservation", r.ID, "err", err)
	}
	st.s.m.settlements.WithLabelValues(string(basis)).Inc()
	st.s.log.Debug("settled", "reservation", r.ID, "api", apiName(st.target.api), "basis", basis,
		"complete", complete, "estimate_tokens", r.Estimate.Total(), "actual_tokens", usage.Total())
	if st.target.api != nil {
		st.s.m.tokens.WithLabelValues(st.target.api.Name(), "actual").Add(float64(usage.Total()))
	}
	if !complete {
		return nil
	}
	// Envoy merges these into the fields written at admission.
	return namespaced(map[string]*structpb.Value{
		"actual_input_tokens":  structpb.NewNumberValue(float64(usage.InputTokens)),
		"actual_output_tokens": structpb.NewNumberValue(float64(usage.OutputTokens)),
		"actual_tokens":        structpb.NewNumberValue(float64(usage.Total())),
		"settled_on":           structpb.NewStringValue(string(basis)),
	})
}

// metadata returns tokenwarden's dynamic metadata: the estimate, plus
// extra fields.
func (st *stream) metadata(extra map[string]*structpb.Value) *structpb.Struct {
	r := st.res
	if r == nil {
		return nil
	}
	f := map[string]*structpb.Value{
		"reservation":     structpb.NewStringValue(r.ID),
		"estimate_tokens": structpb.NewNumberValue(float64(r.Estimate.Total())),
		"estimate_cost":   structpb.NewStringValue(formatAmount(accounting.Cost, r.Cost)),
	}
	if st.target.api != nil {
		f["api"] = structpb.NewStringValue(st.target.api.Name())
		f["model"] = structpb.NewStringValue(st.req.Model)
	}
	for k, v := range extra {
		f[k] = v
	}
	return namespaced(f)
}

// namespaced wraps fields in tokenwarden's metadata namespace.
func namespaced(f map[string]*structpb.Value) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: f}),
	}}
}
