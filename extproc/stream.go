package extproc

import (
	"context"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc/contentcoding"
	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// MetadataNamespace is the dynamic-metadata namespace tokenwarden writes
// (estimate, decision, actual usage) for Envoy's access logs. Envoy keeps
// it only when listed in metadata_options.receiving_namespaces.
const MetadataNamespace = "tokenwarden"

// maxRequestBody bounds a request body the server accumulates; the gRPC
// server refuses larger messages anyway.
const maxRequestBody = 64 << 20

// stream is the state of one HTTP request.
type stream struct {
	s   *Server
	ctx context.Context

	api   llm.API // nil: not an LLM API, counted as a request only
	path  string
	attrs accounting.Attributes
	body  []byte // request body chunks, when Envoy does not buffer
	req   llm.Request
	res   *accounting.Reservation

	status     int
	reader     llm.UsageReader
	decoder    contentcoding.Decoder // set for a compressed response
	unreadable bool                  // a response encoding the server cannot decode
}

// acceptEncoding is the header StripAcceptEncoding removes; never modified.
var acceptEncoding = []string{"accept-encoding"}

// maxDecoded bounds the decompressed bytes read from one response: past
// it (a decompression bomb, or a response no usage report follows) the
// server stops decoding and settles on what it has seen.
const maxDecoded = 256 << 20

func newStream(s *Server, ctx context.Context) *stream {
	return &stream{s: s, ctx: ctx}
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
)

// handle answers one message. last reports a reply after which Envoy
// closes the stream (an immediate response).
func (st *stream) handle(req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, last bool) {
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return st.requestHeaders(r.RequestHeaders, req.MetadataContext)
	case *extprocv3.ProcessingRequest_RequestBody:
		return st.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return continueRequestTrailers, false
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return st.responseHeaders(r.ResponseHeaders), false
	case *extprocv3.ProcessingRequest_ResponseBody:
		return st.responseBody(r.ResponseBody), false
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		st.settle(false)
		return continueResponseTrailers, false
	}
	return nil, false
}

// headerValue finds a header in Envoy's header map. Envoy sends values in
// raw_value; value is read as a fallback for other clients.
func headerValue(h *extprocv3.HttpHeaders, key string) (string, bool) {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.Key == key {
			if len(hv.RawValue) > 0 {
				return string(hv.RawValue), true
			}
			return hv.Value, true
		}
	}
	return "", false
}

func (st *stream) requestHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) (*extprocv3.ProcessingResponse, bool) {
	st.path, _ = headerValue(h, ":path")
	method, _ := headerValue(h, ":method")
	api := lookupAPI(st.path)
	attrs, err := st.s.opts.Identity.resolve(func(k string) (string, bool) { return headerValue(h, k) }, md)
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
	if api != nil && method == "POST" && !h.EndOfStream {
		st.api = api
		hr := &extprocv3.HeadersResponse{}
		if st.s.opts.StripAcceptEncoding {
			hr.Response = &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: acceptEncoding}}
		}
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr}}, false
	}

	// Not an LLM call: count it as a request now, and ask Envoy not to
	// send either body (an override sets both body modes).
	st.attrs = append(st.attrs, accounting.Attribute{Name: "api", Value: "other"})
	if resp, done := st.reserve(accounting.Request{Attributes: st.attrs, RequestsOnly: true}); done {
		return resp, true
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}},
		ModeOverride: &filterv3.ProcessingMode{
			RequestBodyMode:  filterv3.ProcessingMode_NONE,
			ResponseBodyMode: filterv3.ProcessingMode_NONE,
		},
	}, false
}

// reserve runs the limiter. On anything but an admission it returns the
// reply that ends the request, and done.
func (st *stream) reserve(req accounting.Request) (resp *extprocv3.ProcessingResponse, done bool) {
	start := time.Now()
	res, err := st.s.opts.Limiter.Reserve(st.ctx, req)
	st.s.m.decision.Observe(time.Since(start).Seconds())
	if err != nil {
		st.s.log.Error("reservation failed", "api", apiName(st.api), "err", err)
		st.count(st.api, "unavailable")
		return unavailable(st.api), true
	}
	if !res.Admitted {
		st.count(st.api, "rejected")
		st.s.log.Debug("rejected", "api", apiName(st.api), "limit", res.Trip.Limit.Name,
			"requested", res.Trip.Requested, "retry_after", res.Trip.RetryAfter, "never_fits", res.Trip.NeverFits)
		resp := rejection(st.api, res)
		resp.DynamicMetadata = namespaced(map[string]*structpb.Value{
			"decision":        structpb.NewStringValue("rejected"),
			"limit":           structpb.NewStringValue(res.Trip.Limit.Name),
			"estimate_tokens": structpb.NewNumberValue(float64(res.Estimate.Total())),
		})
		return resp, true
	}
	st.res = res
	st.count(st.api, "admitted")
	return nil, false
}

func (st *stream) requestBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	if st.api == nil || st.res != nil {
		return continueRequestBody, false
	}
	if !b.EndOfStream {
		// Envoy is not buffering (a filter config other than the one
		// shipped): collect the body and decide on its last chunk, before
		// the request is complete upstream.
		if len(st.body)+len(b.Body) > maxRequestBody {
			st.count(st.api, "bad_request")
			return badRequest(st.api, "request body too large"), true
		}
		st.body = append(st.body, b.Body...)
		return continueRequestBody, false
	}
	body := b.Body
	if st.body != nil {
		body = append(st.body, body...)
		st.body = nil
	}
	if !utf8.Valid(body) {
		st.count(st.api, "bad_request")
		return badRequest(st.api, "request body is not valid UTF-8"), true
	}
	o := &st.s.opts
	req, err := st.api.ParseRequest(st.path, body, llm.ParseOptions{Counter: o.Counter, DefaultOutputCap: o.DefaultOutputCap})
	if err != nil {
		st.count(st.api, "bad_request")
		return badRequest(st.api, "Invalid request: "+err.Error()), true
	}
	st.req = req
	st.attrs = append(st.attrs,
		accounting.Attribute{Name: "model", Value: req.Model},
		accounting.Attribute{Name: "api", Value: st.api.Name()})
	est := req.Estimate()
	if resp, done := st.reserve(accounting.Request{Attributes: st.attrs, Model: req.Model, Estimate: est}); done {
		return resp, true
	}
	st.s.m.tokens.WithLabelValues(st.api.Name(), "estimated").Add(float64(est.Total()))

	br := &extprocv3.BodyResponse{}
	// The estimate goes in the metadata now, so that a request that never
	// completes is still logged with it; Envoy merges the actual figures
	// written at settlement into the same namespace.
	resp := &extprocv3.ProcessingResponse{
		Response:        &extprocv3.ProcessingResponse_RequestBody{RequestBody: br},
		DynamicMetadata: st.metadata(map[string]*structpb.Value{"decision": structpb.NewStringValue("admitted")}),
	}
	edited, err := st.api.Inject(body, &st.req, llm.InjectOptions{OutputCap: o.InjectOutputCap, StreamUsage: o.InjectStreamUsage})
	if err != nil {
		// The body parsed, so an edit cannot fail; if it does, forward
		// the original: the reservation already bounds the charge.
		st.s.log.Warn("request body edit failed", "api", st.api.Name(), "err", err)
	}
	if edited != nil {
		br.Response = &extprocv3.CommonResponse{
			HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				setHeader("content-length", strconv.Itoa(len(edited)))}},
			BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: edited}},
		}
	}
	return resp, false
}

func (st *stream) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if s, ok := headerValue(h, ":status"); ok {
		st.status, _ = strconv.Atoi(s)
	}
	hr := &extprocv3.HeadersResponse{}
	resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: hr}}
	if st.res == nil {
		return resp
	}
	// The provider's x-ratelimit-* figures describe its whole account,
	// not this caller: remove all of them, then set the caller's (Envoy
	// applies removals first).
	hr.Response = &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		RemoveHeaders: rateLimitHeaderNames,
		SetHeaders:    rateLimitHeaders(&st.res.Dims, nil),
	}}
	if st.api != nil && st.ok() {
		ct, _ := headerValue(h, "content-type")
		reader := st.api.NewUsageReader(&st.req, ct, llm.ReaderOptions{Counter: st.s.opts.Counter, MaxBuffer: st.s.opts.MaxBuffer})
		if enc, _ := headerValue(h, "content-encoding"); enc != "" && enc != "identity" {
			// Bytes go to the client untouched; the reader sees them
			// decoded, incrementally.
			dec, err := contentcoding.NewDecoder(enc, reader.Write, maxDecoded)
			if err != nil {
				st.s.log.Warn("response encoding not supported; settling on the estimate", "api", st.api.Name(), "err", err)
				st.unreadable = true
			} else {
				st.reader, st.decoder = reader, dec
			}
		} else {
			st.reader = reader
		}
	}
	if h.EndOfStream || st.api == nil {
		resp.DynamicMetadata = st.settle(true)
	}
	return resp
}

func (st *stream) ok() bool { return st.status >= 200 && st.status < 300 }

func (st *stream) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if st.reader != nil && len(b.Body) > 0 {
		if st.decoder != nil {
			// An error (corrupt data, the size bound) stops decoding; the
			// settlement then uses what was read before it.
			_ = st.decoder.Write(b.Body)
		} else {
			st.reader.Write(b.Body)
		}
	}
	if !b.EndOfStream {
		return continueResponseBody
	}
	// Settle before this reply: once the client has the whole response,
	// the counters already show it.
	md := st.settle(true)
	if md == nil {
		return continueResponseBody
	}
	return &extprocv3.ProcessingResponse{
		Response:        &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}},
		DynamicMetadata: md,
	}
}

// finish settles a reservation the stream did not: the client went away,
// the upstream failed, or Envoy closed the stream early.
func (st *stream) finish() {
	st.settle(false)
}

// settle books the request's real usage, once. complete says whether the
// response ended normally. It returns the dynamic metadata to report.
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
	var usage accounting.Usage
	var basis string
	switch {
	case st.api == nil:
		basis = "request"
	case st.status != 0 && !st.ok():
		basis = "refused"
	case st.reader != nil:
		if u, ok := st.reader.Usage(); ok {
			usage, basis = u, "usage"
		} else {
			usage = accounting.Usage{InputTokens: r.Estimate.InputTokens, OutputTokens: st.reader.ObservedOutputTokens()}
			basis = "estimate"
		}
	case st.unreadable:
		// Usage cannot be read: the reservation stands as it is.
		usage = accounting.Usage{InputTokens: r.Estimate.InputTokens, OutputTokens: r.Estimate.OutputTokens}
		basis = "estimate"
	default:
		// No response seen at all (cut before the headers), or one
		// without a body.
		usage = accounting.Usage{InputTokens: r.Estimate.InputTokens}
		basis = "estimate"
	}
	if _, err := r.Settle(st.ctx, usage); err != nil {
		st.s.log.Warn("settlement failed; retrying in the background", "reservation", r.ID, "err", err)
	}
	st.s.m.settlements.WithLabelValues(basis).Inc()
	st.s.log.Debug("settled", "reservation", r.ID, "api", apiName(st.api), "basis", basis,
		"complete", complete, "estimate_tokens", r.Estimate.Total(), "actual_tokens", usage.Total())
	if st.api != nil {
		st.s.m.tokens.WithLabelValues(st.api.Name(), "actual").Add(float64(usage.Total()))
	}
	if !complete {
		return nil
	}
	// Envoy merges these into the fields written at admission.
	return namespaced(map[string]*structpb.Value{
		"actual_input_tokens":  structpb.NewNumberValue(float64(usage.InputTokens)),
		"actual_output_tokens": structpb.NewNumberValue(float64(usage.OutputTokens)),
		"actual_tokens":        structpb.NewNumberValue(float64(usage.Total())),
		"settled_on":           structpb.NewStringValue(basis),
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
	if st.api != nil {
		f["api"] = structpb.NewStringValue(st.api.Name())
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

func (st *stream) count(api llm.API, outcome string) {
	st.s.m.requests.WithLabelValues(apiName(api), outcome).Inc()
}

func apiName(api llm.API) string {
	if api == nil {
		return "other"
	}
	return api.Name()
}
