package extproc

import (
	"context"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/contentcoding"
	"github.com/tokenwarden/tokenwarden/internal/learned"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// maxRequestBody bounds a request body the server accumulates; the gRPC
// server refuses larger messages anyway.
const maxRequestBody = 64 << 20

// maxDecoded bounds the decompressed bytes read from one response: past
// it (a decompression bomb, or a response no usage report follows) the
// server stops decoding and settles on what it has seen.
const maxDecoded = 256 << 20

// stream is the state of one HTTP request.
//
// The invariant it keeps: a metered request — one to an LLM API path,
// with a body — reaches the upstream only after its reservation is in
// place, or not at all. Its body is held (BUFFERED: Envoy holds it;
// STREAMED: each chunk is replaced by nothing) until the body is
// complete and reserved; anything else — a body that never completes, a
// processing mode that would let it past, a response that begins before
// the decision — ends the request with an error reply.
type stream struct {
	s   *Server
	ctx context.Context
	// out sends a message on the stream ahead of the reply to the one
	// being handled (see hold); nil when there is no gRPC stream. (The
	// stream itself, not its Send method value: that would cost an
	// allocation per request.)
	out interface {
		Send(*extprocv3.ProcessingResponse) error
	}
	// heldAt is when the request began waiting for capacity (see
	// wait.go); zero if it did not.
	heldAt time.Time

	// bodyMode is the request body mode Envoy announced in the stream's
	// first message (protocol_config); BUFFERED when it announced none.
	bodyMode filterv3.ProcessingMode_BodySendMode
	// headersSeen: the request headers arrived. Nothing can be decided
	// about a request whose path was never seen. trailersSeen: the
	// request trailers arrived. responseSeen: the response headers did.
	headersSeen  bool
	trailersSeen bool
	responseSeen bool

	path   string
	target target
	// metered: the request calls an LLM API and has a body, so it must be
	// reserved before it reaches the upstream. decided: it was admitted
	// and its body released to the upstream.
	metered bool
	decided bool
	// held: chunks of a STREAMED body were replaced by nothing, so the
	// decision must send the whole body in their place.
	held  bool
	attrs accounting.Attributes
	body  []byte // request body chunks collected so far
	// bodyCharge is what the request body is charged in the server's
	// request bytes in flight, under principal (see bodybytes.go); zero
	// before the charge and once it is given back. bodyLength is the
	// body's announced content-length, -1 when it has none.
	bodyCharge int64
	bodyLength int64
	principal  string
	req        llm.Request
	res        *accounting.Reservation
	// capSent: the provider was sent an output cap (the request's own,
	// or one injected), which bounds the output a report may state.
	capSent bool
	// learning: the reservation's output is a learned estimate's (or
	// would be, once learned), under learnKey, which settlement feeds.
	learning bool
	learnKey learned.Key
	// dg is the request's downgrade, if a limit sent it to a fallback
	// model.
	dg downgrade

	status int
	origin origin
	// provider is what the response said about the provider's account,
	// when hasProvider: it corrects the provider limits at settlement.
	provider    accounting.ProviderState
	hasProvider bool
	reader      llm.UsageReader
	decoder     contentcoding.Decoder // set for a compressed response
	unreadable  bool                  // a response encoding the server cannot decode
	// responseBodyUnseen: Envoy announced response_body_mode NONE, so no
	// response body reaches the server and its usage cannot be read.
	responseBodyUnseen bool
	// bodySeen: a byte of the response body arrived.
	bodySeen bool
	// requestID is Envoy's x-request-id, which the settlement's log
	// record carries (a view of the request headers, as path is).
	requestID string
	tr        streamTrace

	// lent[:borrowed] are the buffers the reply being built borrowed
	// (see lend.go). noLend: the stream's replies borrow nothing, as
	// something may read them after they are sent.
	lent     [maxBorrowed]*[]byte
	borrowed int
	noLend   bool
}

func newStream(s *Server, ctx context.Context) *stream {
	return &stream{s: s, ctx: ctx, bodyMode: filterv3.ProcessingMode_BUFFERED}
}

// Replies that carry nothing: Envoy continues unchanged. They are never
// modified, so all streams can send the same ones.
var (
	continueRequestBody = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{}}}
	continueResponseBody = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{}}}
	continueRequestTrailers = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
		RequestTrailers: &extprocv3.TrailersResponse{}}}
	continueResponseTrailers = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
		ResponseTrailers: &extprocv3.TrailersResponse{}}}
	// holdRequestBody replaces a STREAMED request chunk by nothing: the
	// chunk is kept here until the whole body is reserved.
	holdRequestBody = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
			BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}}}}}
)

// handle answers one message. last reports a reply after which Envoy
// closes the stream (an immediate response).
func (st *stream) handle(req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, last bool) {
	if pc := req.GetProtocolConfig(); pc != nil {
		st.bodyMode = pc.GetRequestBodyMode()
		st.responseBodyUnseen = pc.GetResponseBodyMode() == filterv3.ProcessingMode_NONE
	}
	if req.GetObservabilityMode() {
		st.s.warnObservabilityMode()
	}
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return st.requestHeaders(r.RequestHeaders, req.MetadataContext, req.Attributes)
	case *extprocv3.ProcessingRequest_RequestBody:
		return st.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return st.requestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return st.responseHeaders(r.ResponseHeaders, req.Attributes)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return st.responseBody(r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		if resp, last := st.checkMetered(); last {
			return resp, true
		}
		// Trailers end a response whose last body chunk did not.
		var buf [256]byte
		md := newDynamicMetadata(buf[:])
		if !st.settle(true, &md) {
			return continueResponseTrailers, false
		}
		resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
		md.attach(resp)
		return resp, false
	}
	return nil, false
}

// headerValue finds a header in Envoy's header map. Envoy sends values in
// raw_value; value is read as a fallback for other clients. The value
// is raw_value's bytes, viewed rather than copied: nothing modifies a
// received message.
func headerValue(h *extprocv3.HttpHeaders, key string) (string, bool) {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.Key == key {
			if len(hv.RawValue) > 0 {
				return llm.View(hv.RawValue), true
			}
			return hv.Value, true
		}
	}
	return "", false
}

// checkMetered is the invariant's last line, run on every response
// message: an upstream's response to a metered request that was never
// decided must not reach the client. It cannot happen with the
// documented filter config; it can when a request body never completes
// (a streamed body whose trailers Envoy skips). It returns the reply that
// ends the request, and true.
func (st *stream) checkMetered() (*extprocv3.ProcessingResponse, bool) {
	switch {
	case !st.headersSeen:
		// A local reply from a filter before this one (jwt_authn's 401
		// for a forged token): the request never got this far, and
		// nothing was reserved. (A filter that skips request headers
		// could also lead here; its request bodies are refused.)
		return nil, false
	case st.metered && !st.decided && st.origin != fromUpstream:
		// Envoy's own reply to a request it never finished sending (a
		// 413 for a body over its buffer limit): nothing to meter, and
		// the client should see why.
		return nil, false
	case st.metered && !st.decided:
		st.count(st.target.api, "unmetered")
		st.s.log.Error("response to a metered request whose body never completed; refusing it",
			"api", apiName(st.target.api), "path", st.path)
		return unmetered(st.target.api), true
	}
	return nil, false
}

// outOfOrder ends a stream whose messages break Envoy's order (a second
// set of request headers, say): the state a decision rests on can no
// longer be trusted, so the request fails closed.
func (st *stream) outOfOrder(what string) (*extprocv3.ProcessingResponse, bool) {
	st.count(st.target.api, "misconfigured")
	st.s.log.Error("ext_proc messages out of order; refusing the request", "message", what)
	return misconfigured(st.target.api, "the proxy sent "+what+" out of order"), true
}

func (st *stream) count(api llm.API, outcome string) {
	st.countAs(apiName(api), outcome)
}

// countAs counts a request of the API or family name with outcome.
func (st *stream) countAs(name, outcome string) {
	st.s.m.request(name, outcome)
	if st.s.tracer != nil {
		st.traceDecision(name, outcome)
	}
}

func apiName(api llm.API) string {
	if api == nil {
		return "other"
	}
	return api.Name()
}
