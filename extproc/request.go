package extproc

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// meteredHeadersReplies are the replies to a metered request's headers,
// by [strip accept-encoding][STREAMED body][forged route header]: they
// carry nothing of the request but those three facts, so every stream
// sends one of these eight rather than building its own. Never modified.
var meteredHeadersReplies = func() (r [2][2][2]*extprocv3.ProcessingResponse) {
	for strip := range 2 {
		for streamed := range 2 {
			for forged := range 2 {
				r[strip][streamed][forged] = meteredHeadersReply(strip == 1, streamed == 1, forged == 1)
			}
		}
	}
	return r
}()

// meteredHeadersReply builds the reply to a metered request's headers.
// It removes accept-encoding when the options strip it, and
// content-length for a STREAMED body, whose length the decision may
// change in a chunk reply that cannot set headers. A client's own
// routing header (see forgedRouteModel) is removed too, and the route
// matched again without it.
func meteredHeadersReply(strip, streamed, forged bool) *extprocv3.ProcessingResponse {
	var remove []string
	if strip {
		remove = append(remove, "accept-encoding")
	}
	if streamed {
		remove = append(remove, "content-length")
	}
	hr := &extprocv3.HeadersResponse{}
	if forged {
		remove = append(remove, RouteModelHeader)
		hr.Response = &extprocv3.CommonResponse{ClearRouteCache: true}
	}
	if remove != nil {
		if hr.Response == nil {
			hr.Response = &extprocv3.CommonResponse{}
		}
		hr.Response.HeaderMutation = &extprocv3.HeaderMutation{RemoveHeaders: remove}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr}}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (st *stream) requestHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata, ea map[string]*structpb.Struct) (*extprocv3.ProcessingResponse, bool) {
	if st.headersSeen {
		return st.outOfOrder("request headers")
	}
	st.headersSeen = true
	if st.s.tracer != nil {
		st.beginTrace(h)
	}
	st.path, _ = headerValue(h, ":path")
	st.requestID, _ = headerValue(h, "x-request-id")
	st.target = st.s.classify(st.path)
	// A client's own routing header: Envoy may have matched the route on
	// it already (see forgedRouteModel).
	_, forged := headerValue(h, RouteModelHeader)
	if f := st.target.family; f != nil {
		if resp, done := st.unmeteredFamily(f, h); done {
			return resp, true
		}
	}
	if st.target.other && !st.s.opts.CountOtherPaths {
		st.s.m.request(apiName(nil), "passed")
		return passOther(forged), false
	}
	api := st.target.api
	attrs, err := st.s.opts.Identity.resolve(func(k string) (string, bool) { return headerValue(h, k) }, md, ea)
	if err != nil {
		var ie *identityError
		if errors.As(err, &ie) && ie.missing != "" {
			st.count(api, "unauthenticated")
			return unauthenticated(api, err.Error()), true
		}
		st.count(api, "bad_request")
		return badRequest(api, err.Error()), true
	}
	st.attrs = attrs
	// Any request with a body on an LLM API path is metered, whatever its
	// method: what the upstream does with a body is not ours to guess.
	if api != nil && !h.EndOfStream {
		st.metered = true
		switch st.bodyMode {
		case filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED_PARTIAL, filterv3.ProcessingMode_STREAMED:
		default:
			// NONE sends no body to meter; FULL_DUPLEX_STREAMED passes
			// chunks on without waiting for a decision.
			st.count(api, "misconfigured")
			st.s.log.Error("metered request with an unsupported request_body_mode; refusing it",
				"api", api.Name(), "mode", st.bodyMode.String())
			return misconfigured(api, "the filter's request_body_mode is "+st.bodyMode.String()+", not BUFFERED"), true
		}
		if resp, done := st.chargeBody(h); done {
			return resp, true
		}
		strip := st.s.opts.StripAcceptEncoding
		streamed := st.bodyMode == filterv3.ProcessingMode_STREAMED
		return meteredHeadersReplies[b2i(strip)][b2i(streamed)][b2i(forged)], false
	}

	// Not an LLM call, or one of an unmetered family the options allow:
	// count it as a request now, and ask Envoy not to send either body
	// (an override sets both body modes).
	st.target.api = nil
	st.attrs = append(st.attrs, accounting.Attribute{Name: "api", Value: st.target.name()})
	if resp, done := st.reserve(accounting.Request{Attributes: st.attrs, RequestsOnly: true}, nil); done {
		return resp, true
	}
	hr := &extprocv3.HeadersResponse{}
	if forged {
		hr.Response = forgedRouteModel()
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr},
		ModeOverride: &filterv3.ProcessingMode{
			RequestBodyMode:  filterv3.ProcessingMode_NONE,
			ResponseBodyMode: filterv3.ProcessingMode_NONE,
		},
	}, false
}

// passOther is the reply to a request on a path that is not an LLM
// API's, when such paths are not counted: it is not tokenwarden's
// business, so nothing is asked of it (no identity), nothing reserved,
// and Envoy is told to send nothing more of it, neither bodies nor the
// response. Only a client's RouteModelHeader is removed, as on every
// request.
func passOther(forged bool) *extprocv3.ProcessingResponse {
	return passOtherReplies[b2i(forged)]
}

// passOtherReplies are passOther's two replies, shared by every stream
// and never modified.
var passOtherReplies = func() (r [2]*extprocv3.ProcessingResponse) {
	for forged := range 2 {
		hr := &extprocv3.HeadersResponse{}
		if forged == 1 {
			hr.Response = forgedRouteModel()
		}
		r[forged] = &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr},
			ModeOverride: &filterv3.ProcessingMode{
				RequestBodyMode:    filterv3.ProcessingMode_NONE,
				ResponseHeaderMode: filterv3.ProcessingMode_SKIP,
				ResponseBodyMode:   filterv3.ProcessingMode_NONE,
			},
		}
	}
	return r
}()

// forgedRouteModel is the reply to a request that arrives with its own
// x-tokenwarden-model (RouteModelHeader): the header is removed, and the
// route matched again without it. The header is tokenwarden's, set on a
// downgraded request to route its fallback; the shipped edge strips a
// client's copy, but a config that does not would let the client choose
// the fallback's upstream for any model, and Envoy may have matched the
// route on the client's copy before asking tokenwarden (a per-route
// filter config is looked up first), so removing it alone is not enough.
func forgedRouteModel() *extprocv3.CommonResponse {
	return &extprocv3.CommonResponse{
		HeaderMutation:  &extprocv3.HeaderMutation{RemoveHeaders: []string{RouteModelHeader}},
		ClearRouteCache: true,
	}
}

func (st *stream) requestBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	switch {
	case !st.headersSeen:
		st.count(nil, "misconfigured")
		st.s.log.Error("request body without request headers; set processing_mode.request_header_mode SEND")
		return misconfigured(nil, "the filter did not send the request headers"), true
	case st.trailersSeen:
		return st.outOfOrder("request body after the request trailers")
	case !st.metered:
		return continueRequestBody, false
	case st.decided:
		if len(b.Body) > 0 {
			// The body was complete when it was reserved; more of it
			// would reach the upstream unmetered.
			st.count(st.target.api, "bad_request")
			return badRequest(st.target.api, "request body continued after it was complete"), true
		}
		return continueRequestBody, false
	}
	if len(st.body)+len(b.Body) > maxRequestBody {
		st.count(st.target.api, "bad_request")
		return badRequest(st.target.api, "request body too large"), true
	}
	if resp, done := st.fitBody(len(st.body) + len(b.Body)); done {
		return resp, true
	}
	switch st.bodyMode {
	case filterv3.ProcessingMode_STREAMED:
		if st.body == nil && st.bodyLength > 0 {
			// Collected at its announced length, in one buffer, not
			// grown (and copied) chunk by chunk.
			st.body = make([]byte, 0, st.bodyLength)
		}
		st.body = append(st.body, b.Body...)
		if !b.EndOfStream {
			// Hold the chunk: the upstream gets the body only once it
			// is reserved, in the reply to its last chunk.
			st.held = true
			return holdRequestBody, false
		}
	case filterv3.ProcessingMode_BUFFERED_PARTIAL:
		if !b.EndOfStream {
			// Envoy sends what fits in its buffer and lets the rest
			// through without waiting: the whole body cannot be held.
			st.count(st.target.api, "bad_request")
			return badRequest(st.target.api, "request body is larger than the proxy buffers for metering"), true
		}
		st.body = append(st.body, b.Body...)
	default:
		// BUFFERED: this one message is the whole body. end_of_stream
		// is false when request trailers follow; waiting for a later
		// message would let the request through unmetered when Envoy
		// skips the trailers.
		if st.body == nil {
			st.body = b.Body
		} else {
			st.body = append(st.body, b.Body...)
		}
	}
	body := st.body
	st.body = nil
	return st.decide(body)
}

// requestTrailers answers the request's trailers. A metered request is
// decided on its body; trailers before that (a STREAMED body whose last
// chunk did not end the stream, or no body at all) cannot carry the
// body the upstream needs, so the request is refused.
func (st *stream) requestTrailers() (*extprocv3.ProcessingResponse, bool) {
	switch {
	case !st.headersSeen:
		st.count(nil, "misconfigured")
		return misconfigured(nil, "the filter did not send the request headers"), true
	case st.trailersSeen:
		return st.outOfOrder("request trailers")
	case st.metered && !st.decided:
		st.count(st.target.api, "bad_request")
		return badRequest(st.target.api, "request trailers are not supported with a streamed request body"), true
	}
	st.trailersSeen = true
	return continueRequestTrailers, false
}

// decide estimates and reserves a metered request's complete body, and
// releases it to the upstream (edited, and in place of held chunks), or
// ends the request.
func (st *stream) decide(body []byte) (*extprocv3.ProcessingResponse, bool) {
	api := st.target.api
	o := &st.s.opts
	if st.s.tracer != nil {
		st.tr.start = time.Now() // the decision's work starts with the whole body
	}
	req, err := st.s.parse(st.target, st.path, body, nil)
	if err != nil {
		st.count(api, "bad_request")
		return badRequest(api, err.Error()), true
	}
	// The parsers' strings are views of the body; the stream keeps the
	// request until the response ends, and must not keep the body with
	// it: the model is copied, and the service tier, read only here,
	// left out.
	req.Model = strings.Clone(req.Model)
	priceFactor := st.s.priceFactor(req.ServiceTier)
	req.ServiceTier = ""
	st.req = req
	st.attrs = append(st.attrs,
		accounting.Attribute{Name: AttributeModel, Value: accounting.ModelFamily(req.Model)},
		accounting.Attribute{Name: AttributeAPI, Value: api.Name()})
	est := st.learnedEstimate(req.Estimate())
	if resp, done := st.reserve(accounting.Request{Attributes: st.attrs, Model: req.Model, Estimate: est,
		PriceFactor: priceFactor}, st.downgrader(body)); done {
		st.dg = downgrade{}
		return resp, true
	}
	st.decided = true
	// replace: the body Envoy holds is not the one to send upstream.
	replace := st.held
	if st.dg.from != "" && st.dg.body != nil {
		// Admitted on a fallback: the body that names it goes upstream
		// (with the edits below, made for the fallback).
		body, st.dg.body, replace = st.dg.body, nil, true
		// The parse's Shape describes the body it checked, not this
		// one: the edit below finds its way through the new body.
		st.req.Shape = llm.Shape{}
	}
	st.s.m.tokensEstimated(api.Name(), est.Total())

	// The edited body lives until the release is sent: it goes into a
	// borrowed buffer, with room for the usual edits (an output cap, the
	// stream's usage option).
	edited, err := api.Inject(body, &st.req, llm.InjectOptions{OutputCap: o.InjectOutputCap, StreamUsage: o.InjectStreamUsage,
		Buf: st.borrow(len(body) + injectRoom)})
	if err != nil {
		// The body parsed, so an edit cannot fail; if it does, forward
		// the original: the reservation already bounds the charge.
		st.s.log.Warn("request body edit failed", "api", api.Name(), "err", err)
	}
	// The provider holds the output to a cap it was sent: the request's
	// own, or the one injected (the first edit, when asked for).
	st.capSent = st.req.CapGiven || o.InjectOutputCap && err == nil && edited != nil
	if edited == nil && replace {
		edited = body
	}
	streamed := st.bodyMode == filterv3.ProcessingMode_STREAMED
	// The new length, when the body changes. (A STREAMED chunk's reply
	// cannot set headers; content-length went with the request headers.)
	rel := release{body: edited, length: edited != nil && !streamed}
	if st.dg.from != "" && !streamed {
		// The request's headers wait for this reply (BUFFERED): name the
		// fallback for the routes, and have Envoy match the route again
		// on the edited headers.
		rel.extra, rel.clearRoute = st.downgradeHeaders(nil), true
	}
	return rel.reply(st), false
}

// injectRoom is the room borrowed for a request body's edits beyond its
// own length: an output cap and OpenAI's stream_options, with the
// longest names the formats give them, take about 80 bytes.
const injectRoom = 128

// admissionMetadata adds an admitted request's fields to md. They go in
// the metadata at admission, so that a request that never completes is
// still logged with its estimate; Envoy merges the actual figures
// written at settlement into the same namespace.
func (st *stream) admissionMetadata(md *dynamicMetadata) {
	st.reservationMetadata(md)
	if st.dg.from != "" {
		md.known(MetaDecision, "downgraded")
		md.str(MetaDowngradedFrom, st.dg.from)
		md.str(MetaLimit, st.dg.limit)
	} else {
		md.known(MetaDecision, "admitted")
	}
	if sr := st.res.ShadowRejected; sr != nil {
		md.str(MetaShadowRejected, limitNames(sr))
	}
	waitMetadata(md, st.res)
}

// reserve runs the limiter. On anything but an admission it returns the
// reply that ends the request, and done. With downgrade (see
// [stream.downgrader]), a refusal may be admitted on a fallback model.
func (st *stream) reserve(req accounting.Request, downgrade func(model string) bool) (resp *extprocv3.ProcessingResponse, done bool) {
	api := st.target.shape()
	start := time.Now()
	var res, refused *accounting.Reservation
	var err error
	if downgrade != nil {
		res, refused, err = st.s.opts.Limiter.ReserveWaitingOrDowngrade(st.ctx, req, st.hold, downgrade)
	} else {
		res, err = st.s.opts.Limiter.ReserveWaiting(st.ctx, req, st.hold)
	}
	took := time.Since(start)
	if !st.heldAt.IsZero() {
		// The decision's own time; the wait is in tokenwarden_wait_seconds.
		took = st.heldAt.Sub(start)
	}
	st.s.m.decision.Observe(took.Seconds())
	if st.s.tracer != nil {
		st.traceReserved(res, took)
	}
	if err != nil {
		st.s.log.Error("reservation failed", "api", st.target.name(), "err", err)
		st.countAs(st.target.name(), "unavailable")
		return unavailable(api), true
	}
	if !res.Admitted {
		st.countAs(st.target.name(), string(res.Outcome()))
		if st.s.log.Enabled(st.ctx, slog.LevelDebug) {
			st.s.log.Debug("rejected", "api", st.target.name(), "limit", res.Trip.Limit.Name,
				"requested", res.Trip.Requested, "retry_after", res.Trip.RetryAfter, "never_fits", res.Trip.NeverFits)
		}
		resp := rejection(api, res, st.s.standardRateLimitHeaders(st.target.api, &res.Dims, nil), time.Now(), st.s.opts.ShouldRetryMax)
		var buf [256]byte
		md := newDynamicMetadata(buf[:])
		md.known(MetaDecision, "rejected")
		md.str(MetaLimit, res.Trip.Limit.Name)
		md.num(MetaEstimateTokens, float64(res.Estimate.Total()))
		waitMetadata(&md, res)
		md.attach(resp)
		return resp, true
	}
	st.res = res
	outcome := string(res.Outcome())
	if refused != nil {
		outcome = st.downgraded(refused, res)
	}
	st.countAs(st.target.name(), outcome)
	return nil, false
}
