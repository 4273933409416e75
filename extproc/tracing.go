package extproc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// TracerName is the instrumentation scope of the server's spans.
const TracerName = "github.com/tokenwarden/tokenwarden/extproc"

// Span names. A request has at most one of each: the decision ends when
// the request is admitted or refused, the settlement when its usage is
// booked — after the response, or when the stream is cut.
const (
	SpanDecision   = "tokenwarden.decision"
	SpanSettlement = "tokenwarden.settlement"
)

// Span attribute keys. Identity values are never among them, except the
// attributes Options.TraceAttributes names, under AttrIdentityPrefix.
const (
	AttrAPI             = "tokenwarden.api"
	AttrModel           = "gen_ai.request.model"
	AttrOutcome         = "tokenwarden.outcome"
	AttrLimit           = "tokenwarden.limit"
	AttrRetryAfterMs    = "tokenwarden.retry_after_ms"
	AttrReservation     = "tokenwarden.reservation"
	AttrEstimateTokens  = "tokenwarden.estimate.tokens"
	AttrEstimateCost    = "tokenwarden.estimate.cost_usd"
	AttrStoreDurationMs = "tokenwarden.store.duration_ms"
	AttrBasis           = "tokenwarden.basis"
	AttrComplete        = "tokenwarden.complete"
	AttrStatus          = "http.response.status_code"
	AttrInputTokens     = "gen_ai.usage.input_tokens"
	AttrOutputTokens    = "gen_ai.usage.output_tokens"
	AttrActualTokens    = "tokenwarden.actual.tokens"
	AttrActualCost      = "tokenwarden.actual.cost_usd"
	AttrSettleRetrying  = "tokenwarden.settle.retrying"
	AttrIdentityPrefix  = "tokenwarden.identity."
)

// traceContext reads the W3C traceparent and tracestate fields. It is
// stateless, so one value serves every stream.
var traceContext propagation.TraceContext

// streamTrace is a stream's tracing state; it stays zero when the server
// has no tracer.
type streamTrace struct {
	// parent holds the remote span the stream's spans belong to (or
	// none); after the decision, the decision span when there was none,
	// so that the settlement joins the same trace.
	parent context.Context
	// start is when the decision began: the request headers' arrival,
	// then the complete body's for a metered request.
	start time.Time
	// decided: the decision span was recorded. A stream has one decision,
	// whatever later messages say.
	decided bool
	// res is the limiter's answer, admitted or not; store is how long
	// it took.
	res   *accounting.Reservation
	store time.Duration
}

// validateTracing reports TraceAttributes that are not identity
// attributes, named by their config key.
func (o *Options) validateTracing() []error {
	var errs []error
	for i, name := range o.TraceAttributes {
		known := slices.ContainsFunc(o.Identity.Attributes, func(a AttributeSource) bool { return a.Name == name })
		if !known {
			errs = append(errs, accounting.FieldErrorf(fmt.Sprintf("tracing.attributes[%d]", i),
				"%q is not one of identity.attributes", name))
		}
	}
	return errs
}

// newTracer returns the server's tracer, or nil when tracing is off:
// every tracing step is skipped on a nil tracer, so that a server without
// a TracerProvider does no tracing work at all.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// beginTrace finds the trace a request belongs to and starts the
// decision's clock. Envoy with tracing on sends the context of its own
// span for the ext_proc call in the gRPC stream's metadata; without, a
// traceparent the client sent is in the request headers. Envoy's is
// preferred: it is a descendant of the client's, the request's own
// place in the trace.
func (st *stream) beginTrace(h *extprocv3.HttpHeaders) {
	st.tr.start = time.Now()
	if md, ok := metadata.FromIncomingContext(st.ctx); ok {
		ctx := traceContext.Extract(context.Background(), grpcCarrier(md))
		if trace.SpanContextFromContext(ctx).IsValid() {
			st.tr.parent = ctx
			return
		}
	}
	st.tr.parent = traceContext.Extract(context.Background(), headerCarrier{h})
}

// traceReserved keeps the limiter's answer for the decision span.
func (st *stream) traceReserved(res *accounting.Reservation, store time.Duration) {
	st.tr.res, st.tr.store = res, store
}

// traceDecision records the decision span, once, when a request's
// outcome is counted.
func (st *stream) traceDecision(api string, outcome string) {
	tr := &st.tr
	if tr.decided {
		return
	}
	tr.decided = true
	parent := tr.parent
	if parent == nil {
		parent = context.Background()
	}
	start := tr.start
	if start.IsZero() {
		start = time.Now()
	}
	attrs := make([]attribute.KeyValue, 0, 12+len(st.s.opts.TraceAttributes))
	attrs = append(attrs, attribute.String(AttrAPI, api), attribute.String(AttrOutcome, outcome))
	if st.req.Model != "" {
		attrs = append(attrs, attribute.String(AttrModel, boundedModel(st.req.Model)))
	}
	if r := tr.res; r != nil {
		attrs = append(attrs,
			attribute.Int64(AttrEstimateTokens, r.Estimate.Total()),
			attribute.Float64(AttrStoreDurationMs, float64(tr.store)/float64(time.Millisecond)))
		if r.Cost > 0 {
			attrs = append(attrs, attribute.Float64(AttrEstimateCost, float64(r.Cost)/1e6))
		}
		switch {
		case r.Admitted:
			attrs = append(attrs, attribute.String(AttrReservation, r.ID))
		case r.Trip.Limit != nil:
			attrs = append(attrs, attribute.String(AttrLimit, r.Trip.Limit.Name),
				attribute.Int64(AttrRetryAfterMs, r.Trip.RetryAfter.Milliseconds()))
		}
	}
	for _, name := range st.s.opts.TraceAttributes {
		for _, a := range st.attrs {
			if a.Name == name {
				attrs = append(attrs, attribute.String(AttrIdentityPrefix+name, a.Value))
				break
			}
		}
	}
	ctx, span := st.s.tracer.Start(parent, SpanDecision, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	switch outcome {
	case "unavailable", "misconfigured", "unmetered":
		// The server could not do its job; a refusal by a limit, or of
		// a bad request, is the job done.
		span.SetStatus(otelcodes.Error, outcome)
	}
	span.End()
	if !trace.SpanContextFromContext(tr.parent).IsValid() {
		// No trace came with the request: the decision span is its
		// root, and the settlement its child.
		tr.parent = ctx
	}
	// The reservation is the stream's own from here (st.res) when it was
	// admitted; a rejection's is not needed again.
	tr.res = nil
}

// traceClock is the start of a settlement span: the time when tracing
// is on, and nothing (no clock read) when it is off.
func (st *stream) traceClock() time.Time {
	if st.s.tracer == nil {
		return time.Time{}
	}
	return time.Now()
}

// traceSettlement records the settlement span, from start to now.
// settleErr is the store's answer to the first attempt: the settlement
// is then retried in the background, after the span has ended.
func (st *stream) traceSettlement(start time.Time, r *accounting.Reservation, usage accounting.Usage, basis Basis, complete bool, settleErr error) {
	parent := st.tr.parent
	if parent == nil {
		parent = context.Background()
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrAPI, apiName(st.target.api)),
		attribute.String(AttrBasis, string(basis)),
		attribute.Bool(AttrComplete, complete),
		attribute.String(AttrReservation, r.ID),
		attribute.Int64(AttrInputTokens, usage.InputTokens),
		attribute.Int64(AttrOutputTokens, usage.OutputTokens),
		attribute.Int64(AttrActualTokens, usage.Total()),
	}
	if st.status != 0 {
		attrs = append(attrs, attribute.Int(AttrStatus, st.status))
	}
	if st.req.Model != "" {
		attrs = append(attrs, attribute.String(AttrModel, boundedModel(st.req.Model)))
	}
	if cost, ok := r.UsageCost(usage); ok {
		attrs = append(attrs, attribute.Float64(AttrActualCost, float64(cost)/1e6))
	}
	if settleErr != nil {
		attrs = append(attrs, attribute.Bool(AttrSettleRetrying, true))
	}
	_, span := st.s.tracer.Start(parent, SpanSettlement, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if settleErr != nil {
		span.RecordError(settleErr)
		span.SetStatus(otelcodes.Error, "settlement failed; retrying in the background")
	}
	span.End()
}

// headerCarrier reads trace context fields from Envoy's request headers.
type headerCarrier struct{ h *extprocv3.HttpHeaders }

func (c headerCarrier) Get(key string) string {
	v, _ := headerValue(c.h, key)
	// A copy: the value is a view of the message, which the trace
	// state would otherwise keep for the stream's life.
	return strings.Clone(v)
}
func (headerCarrier) Set(string, string) {}
func (c headerCarrier) Keys() []string {
	var keys []string
	for _, hv := range c.h.GetHeaders().GetHeaders() {
		keys = append(keys, hv.Key)
	}
	return keys
}

// grpcCarrier reads trace context fields from the gRPC stream's
// metadata.
type grpcCarrier metadata.MD

func (c grpcCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (grpcCarrier) Set(string, string) {}
func (c grpcCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
