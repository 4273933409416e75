// Package envoytest plays Envoy's side of the ext_proc stream, in process,
// so that the server can be tested exactly and fast. It is not a proxy:
// the test supplies the client's request and the upstream's response, and
// gets back what the client would receive.
//
// # What it models
//
// It plays Envoy 1.40's ext_proc filter. By default it has tokenwarden's
// documented filter config (request headers SEND, request body BUFFERED,
// response headers SEND, response body STREAMED, trailers SKIP,
// allow_mode_override true, failure_mode_allow false); [Filter] switches
// to the other request modes an operator could set by mistake.
//
//   - One gRPC stream per request, over a real gRPC connection (bufconn),
//     opened on the first message, which carries protocol_config (the
//     body modes) unless Filter.NoProtocolConfig.
//
//   - Headers are sent as HeaderValue{key (lower-case), raw_value}, with
//     the pseudo-headers :method, :path, :authority, :scheme (and :status
//     on responses). end_of_stream on headers means no body and no
//     trailers follow.
//
//   - BUFFERED: the whole request body in one message after the headers
//     reply, end_of_stream true — or false when request trailers follow.
//     A body mutation replaces it; if its length changes, content-length
//     must be set to match in the same reply, or the request fails (the
//     strictest reading of Envoy's behaviour).
//
//   - BUFFERED_PARTIAL: BUFFERED up to a limit; past it, the first part
//     with end_of_stream false, and the rest goes upstream unprocessed.
//
//   - STREAMED (request or response): chunks are sent pipelined — without
//     waiting for replies — and each needs one BodyResponse, in order; a
//     body mutation replaces that chunk (clear_body empties it) and header
//     mutations are ignored. A request content-length that no longer
//     matches what the upstream gets fails the request.
//
//   - NONE: no body messages; the body goes upstream as it is.
//
//   - Request trailers: with request_trailer_mode SEND, a request_trailers
//     message after the body; with SKIP, none — the trailers go upstream
//     unseen. Response trailers are not modelled.
//
//   - mode_override, only in a headers reply: both body modes are taken
//     from it (an unset body mode means NONE); header modes left DEFAULT
//     mean no change.
//
//   - Header mutations: remove_headers first, then set_headers; only
//     raw_value is read (a value-only header becomes empty; both set is
//     an error); append unset/false overwrites, true adds; host,
//     :authority, :scheme, :method and x-envoy-* cannot be set; append_action
//     is ignored.
//
//   - An immediate_response in reply to any message ends the request with
//     a local reply; in reply to a request message the upstream is never
//     called.
//
//   - A reply of the wrong kind, a gRPC error or a stream the server
//     closes early gives the client a 500 (status_on_error, with
//     failure_mode_allow false).
//
//   - A client disconnect is a cancelled stream: the server sees
//     codes.Canceled from Recv. UpstreamResponse says when: before the
//     response headers, after them, or after some body chunks.
//
//   - UpstreamResponse.DuplicateEnd ends the response body twice, which
//     Envoy never does, so that tests can show a server settles once
//     however often it hears that a stream ended.
//
//   - The router adds x-envoy-upstream-service-time to every upstream
//     response; Envoy's own replies (UpstreamResponse.EnvoyReply: a route
//     timeout's 504, a reset's 503) are text/plain without it, and reach
//     the filter like any response. With Filter.ResponseAttributes the
//     response headers carry the response.code_details attribute.
//
//   - override_message_timeout: a message that carries it is not a
//     reply; the filter takes the timeout if it is 1ms up to
//     max_message_timeout (Filter.MaxMessageTimeout) and the first for
//     the message awaiting its reply, and ignores it otherwise, reading
//     on for the reply either way. Response reports both kinds.
//
// It does not model message_timeout itself, FULL_DUPLEX_STREAMED, response
// trailers, route-cache clearing or Envoy's buffer limits (413). Where
// it models a behaviour of the real Envoy, the end-to-end tests in envoy/
// check the same behaviour against Envoy 1.40 itself.
package envoytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/structpb"
)

// Envoy is a fake Envoy connected to an ext_proc server.
type Envoy struct {
	// Filter is the filter configuration it plays; set it before the
	// first Do. The zero value is tokenwarden's documented one.
	Filter Filter

	client extprocv3.ExternalProcessorClient
	active sync.WaitGroup // server handlers still running
	remote bool           // the server runs elsewhere: active is not tracked
}

// tracked wraps the server to know when its handlers have returned, so
// tests can wait for a cancelled stream's settlement without sleeping.
type tracked struct {
	extprocv3.ExternalProcessorServer
	e *Envoy
}

func (t tracked) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	defer t.e.active.Done()
	return t.ExternalProcessorServer.Process(s)
}

// Start serves srv over an in-memory gRPC connection with opts and
// returns an Envoy talking to it. Everything stops at the end of the test.
func Start(t testing.TB, srv extprocv3.ExternalProcessorServer, opts ...grpc.ServerOption) *Envoy {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(opts...)
	e := &Envoy{}
	extprocv3.RegisterExternalProcessorServer(gs, tracked{srv, e})
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(128<<20)))
	if err != nil {
		t.Fatalf("envoytest: dialing: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	e.client = extprocv3.NewExternalProcessorClient(conn)
	return e
}

// Connect returns an Envoy talking to an ext_proc server listening on a
// TCP address, such as the tokenwarden binary. Its Wait does not know
// about that server's handlers and returns at once.
func Connect(t testing.TB, addr string) *Envoy {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(128<<20)))
	if err != nil {
		t.Fatalf("envoytest: dialing %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &Envoy{client: extprocv3.NewExternalProcessorClient(conn), remote: true}
}

// Client returns the raw ext_proc client, for tests that drive a stream
// message by message.
func (e *Envoy) Client() extprocv3.ExternalProcessorClient { return e.client }

// Open opens a raw ext_proc stream, for tests that drive one message by
// message, whose server handler Wait waits for as for a Do's.
func (e *Envoy) Open(ctx context.Context) (extprocv3.ExternalProcessor_ProcessClient, error) {
	if !e.remote {
		e.active.Add(1)
	}
	stream, err := e.client.Process(ctx)
	if err != nil && !e.remote {
		e.active.Done()
	}
	return stream, err
}

// Wait blocks until every server handler started so far has returned:
// after it, a stream that was cut has settled.
func (e *Envoy) Wait() { e.active.Wait() }

// Request is the client's HTTP request.
type Request struct {
	Method string // default POST
	Path   string
	// Headers are sent in order; keys are lower-cased.
	Headers [][2]string
	Body    []byte
	// Chunks, when set, is the body as Envoy's data callbacks see it (a
	// STREAMED body is sent chunk by chunk); Body is then ignored.
	Chunks [][]byte
	// Trailers are request trailers (HTTP/2): with them, the body's last
	// chunk does not end the stream.
	Trailers [][2]string
	// Metadata is the dynamic metadata Envoy forwards (metadata_context),
	// e.g. a jwt_authn payload.
	Metadata *corev3.Metadata
	// Attributes are the values of the filter's request_attributes
	// (xds.cluster_name, …), which Envoy sends with the request headers.
	Attributes map[string]string
}

// UpstreamRequest is what reaches the upstream after the filter.
type UpstreamRequest struct {
	// Header holds the request headers as the router sees them,
	// pseudo-headers (:path) included.
	Header   http.Header
	Body     []byte
	Trailers http.Header
	// RouteCleared reports that a reply to the request's headers or body
	// set clear_route_cache: Envoy matches the route again, on Header.
	RouteCleared bool
}

// UpstreamResponse is what the upstream answers.
type UpstreamResponse struct {
	Status int
	// Headers are the response headers; keys are lower-cased.
	Headers [][2]string
	// Chunks are the body as Envoy's data callbacks see it. None means a
	// header-only response (end_of_stream on the headers).
	Chunks [][]byte
	// CutAfter, when positive, makes the client disconnect after that
	// many chunks have been sent (Envoy then cancels the stream).
	CutAfter int
	// CutBeforeHeaders disconnects the client before the response
	// headers arrive.
	CutBeforeHeaders bool
	// CutAfterHeaders disconnects the client once the reply to the
	// response headers is in, before any body chunk is sent.
	CutAfterHeaders bool
	// DuplicateEnd sends, after the last chunk (end_of_stream true), one
	// more empty body message with end_of_stream true, and awaits its
	// reply like any other: a stream that ends twice. Envoy itself does
	// not do this; a server must settle once however often it is told
	// the stream ended.
	DuplicateEnd bool
	// EnvoyReply, when set, replaces the upstream's response with Envoy's
	// own local reply, whose response code details it is:
	// "response_timeout" (a route timeout: 504), or another reason such
	// as "upstream_reset_before_response_started{connection_termination}"
	// (503). The other fields are then ignored.
	EnvoyReply string
}

// Upstream answers a request that the filter let through.
type Upstream func(*UpstreamRequest) UpstreamResponse

// Response is what the client receives.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Local reports a reply generated by the filter (immediate response
	// or a failure), not by the upstream.
	Local bool
	// Details is the immediate response's details (RESPONSE_CODE_DETAILS).
	Details string
	// Upstream is the request as the upstream got it; nil if not called.
	Upstream *UpstreamRequest
	// Cut reports a response the client abandoned.
	Cut bool
	// Err describes why the filter failed the request (Status 500).
	Err error
	// Metadata is the dynamic metadata the server wrote, merged per
	// namespace in reply order (as Envoy merges it for access logs).
	Metadata map[string]map[string]any
	// TimeoutOverrides are the override_message_timeout values the
	// filter took; IgnoredOverrides those it ignored (out of range, or a
	// second one for the same message).
	TimeoutOverrides, IgnoredOverrides []time.Duration
}

// Filter is the ext_proc filter configuration the test Envoy plays.
// The zero value is tokenwarden's documented one: request headers SEND,
// request body BUFFERED, request trailers SKIP, response headers SEND,
// response body STREAMED, response trailers SKIP. The other settings
// model operator mistakes and other deployments, so that tests can show
// what the server does under them.
type Filter struct {
	// RequestBody is the request body mode.
	RequestBody BodyMode
	// SendRequestTrailers sets request_trailer_mode SEND.
	SendRequestTrailers bool
	// SkipRequestHeaders sets request_header_mode SKIP: the server sees
	// no request headers, and the first message it gets is the body.
	SkipRequestHeaders bool
	// PartialLimit is the buffer limit of BufferedPartial; zero means
	// 1 MiB.
	PartialLimit int
	// NoProtocolConfig leaves protocol_config out of the first message,
	// as Envoys before 1.31 do.
	NoProtocolConfig bool
	// ObservabilityMode sets observability_mode on every message (the
	// test Envoy still waits for replies; the flag is what it models).
	ObservabilityMode bool
	// ResponseAttributes sets response_attributes:
	// [response.code_details], sent with the response headers.
	ResponseAttributes bool
	// NoResponseBody sets response_body_mode NONE: the response body
	// goes to the client unseen.
	NoResponseBody bool
	// MaxMessageTimeout is the filter's max_message_timeout, the longest
	// override_message_timeout it takes; zero means the shipped configs'
	// (ShippedMaxMessageTimeout). Below 1ms, no override is taken (as
	// when Envoy's is unset).
	MaxMessageTimeout time.Duration
}

// ShippedMaxMessageTimeout is the max_message_timeout of the shipped
// Envoy configs (envoy/envoy.yaml, the Istio EnvoyFilter): the longest
// on_exhausted wait, accounting.MaxWaitUpTo, plus accounting.WaitMargin.
const ShippedMaxMessageTimeout = 11 * time.Second

// BodyMode is a request body send mode.
type BodyMode int

// The request body modes. Buffered is the documented one.
const (
	// Buffered: the whole body in one message. end_of_stream is false
	// when trailers follow.
	Buffered BodyMode = iota
	// Streamed: each chunk in its own message, pipelined; a reply's body
	// mutation replaces that chunk, and its header mutation is ignored.
	Streamed
	// BufferedPartial: Buffered up to PartialLimit; a larger body sends
	// the first PartialLimit bytes (end_of_stream false) and lets the
	// rest through to the upstream unprocessed.
	BufferedPartial
	// None: no body message; the body goes to the upstream as it is.
	None
	// FullDuplex: FULL_DUPLEX_STREAMED, not modelled beyond announcing
	// it: a request that gets this far fails.
	FullDuplex
)

func responseBodyMode(f Filter) filterv3.ProcessingMode_BodySendMode {
	if f.NoResponseBody {
		return filterv3.ProcessingMode_NONE
	}
	return filterv3.ProcessingMode_STREAMED
}

func (m BodyMode) proto() filterv3.ProcessingMode_BodySendMode {
	switch m {
	case Streamed:
		return filterv3.ProcessingMode_STREAMED
	case BufferedPartial:
		return filterv3.ProcessingMode_BUFFERED_PARTIAL
	case None:
		return filterv3.ProcessingMode_NONE
	case FullDuplex:
		return filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	}
	return filterv3.ProcessingMode_BUFFERED
}

// modes is the filter's processing mode for one request.
type modes struct {
	requestBody, responseBody filterv3.ProcessingMode_BodySendMode
	responseHeaders           bool
	requestTrailers           bool
}

// Do sends req through the filter to upstream and returns what the client
// receives.
func (e *Envoy) Do(ctx context.Context, req Request, upstream Upstream) *Response {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !e.remote {
		e.active.Add(1) // the server's handler for this stream
	}
	stream, err := e.client.Process(ctx)
	if err != nil {
		if !e.remote {
			e.active.Done()
		}
		return failure(fmt.Errorf("opening stream: %w", err))
	}
	x := &exchange{stream: stream, m: modes{
		requestBody:     e.Filter.RequestBody.proto(),
		responseBody:    responseBodyMode(e.Filter),
		responseHeaders: true,
		requestTrailers: e.Filter.SendRequestTrailers,
	}, f: e.Filter, first: true, metadata: req.Metadata}
	resp := x.run(req, upstream, cancel)
	resp.Metadata = x.written
	resp.TimeoutOverrides, resp.IgnoredOverrides = x.overrides, x.ignored
	if resp.Err == nil && !resp.Cut {
		_ = stream.CloseSend()
	}
	return resp
}

func failure(err error) *Response {
	return &Response{Status: 500, Header: http.Header{}, Local: true, Err: err}
}

type exchange struct {
	stream   extprocv3.ExternalProcessor_ProcessClient
	m        modes
	f        Filter
	first    bool
	metadata *corev3.Metadata
	written  map[string]map[string]any // dynamic metadata from the server
	// routeCleared: a request-direction reply set clear_route_cache.
	routeCleared bool
	// overrides are the message timeout overrides taken, ignored those
	// Envoy would ignore; overridden holds the states that had one.
	overrides, ignored []time.Duration
	overridden         map[string]bool
}

// overrideTimeout takes an override_message_timeout sent while Envoy
// awaits the reply to a kind message, as Envoy 1.40 does: honoured when
// it is 1ms..max_message_timeout and the first in that state, ignored
// otherwise (the message's timer then runs on).
func (x *exchange) overrideTimeout(kind string, d time.Duration) {
	max := x.f.MaxMessageTimeout
	if max == 0 {
		max = ShippedMaxMessageTimeout
	}
	if d < time.Millisecond || d > max || x.overridden[kind] {
		x.ignored = append(x.ignored, d)
		return
	}
	if x.overridden == nil {
		x.overridden = map[string]bool{}
	}
	x.overridden[kind] = true
	x.overrides = append(x.overrides, d)
}

func (x *exchange) recordMetadata(r *extprocv3.ProcessingResponse) {
	for ns, v := range r.GetDynamicMetadata().GetFields() {
		if x.written == nil {
			x.written = map[string]map[string]any{}
		}
		if x.written[ns] == nil {
			x.written[ns] = map[string]any{}
		}
		for k, f := range v.GetStructValue().GetFields() {
			x.written[ns][k] = f.AsInterface()
		}
	}
}

func (x *exchange) send(r *extprocv3.ProcessingRequest) error {
	if x.first {
		if !x.f.NoProtocolConfig {
			r.ProtocolConfig = &extprocv3.ProtocolConfiguration{
				RequestBodyMode:  x.m.requestBody,
				ResponseBodyMode: x.m.responseBody,
			}
		}
		x.first = false
	}
	r.ObservabilityMode = x.f.ObservabilityMode
	r.MetadataContext = x.metadata
	return x.stream.Send(r)
}

// errImmediate carries an immediate response out of the exchange.
type errImmediate struct{ r *extprocv3.ImmediateResponse }

func (e errImmediate) Error() string { return "immediate response" }

// recv waits for the reply to a message and checks its kind. A message
// with override_message_timeout is not a reply: Envoy takes the timeout
// (see overrideTimeout) and ignores the rest of it.
func (x *exchange) recv(kind string) (*extprocv3.ProcessingResponse, error) {
	r, err := x.stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("server closed the stream awaiting a %s reply", kind)
		}
		return nil, fmt.Errorf("awaiting a %s reply: %w", kind, err)
	}
	if d := r.GetOverrideMessageTimeout(); d != nil {
		x.overrideTimeout(kind, d.AsDuration())
		return x.recv(kind)
	}
	x.recordMetadata(r)
	if ir := r.GetImmediateResponse(); ir != nil {
		return nil, errImmediate{ir}
	}
	if !IsReplyTo(kind, r) {
		return nil, fmt.Errorf("spurious reply: got %T, want a %s reply", r.Response, kind)
	}
	return r, nil
}

func (x *exchange) run(req Request, upstream Upstream, disconnect context.CancelFunc) *Response {
	method := req.Method
	if method == "" {
		method = "POST"
	}
	hdr := newHeaders()
	hdr.add(":method", method)
	hdr.add(":path", req.Path)
	hdr.add(":authority", "llm.example")
	hdr.add(":scheme", "https")
	for _, h := range req.Headers {
		hdr.add(h[0], h[1])
	}
	chunks := req.Chunks
	if chunks == nil && len(req.Body) > 0 {
		chunks = [][]byte{req.Body}
	}
	var whole []byte
	for _, c := range chunks {
		whole = append(whole, c...)
	}
	if len(whole) > 0 && !hdr.has("content-length") {
		hdr.add("content-length", strconv.Itoa(len(whole)))
	}
	trailers := len(req.Trailers) > 0

	// Request headers.
	if !x.f.SkipRequestHeaders {
		msg := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocv3.HttpHeaders{Headers: hdr.proto(), EndOfStream: len(whole) == 0 && !trailers}}}
		if len(req.Attributes) > 0 {
			fields := make(map[string]*structpb.Value, len(req.Attributes))
			for k, v := range req.Attributes {
				fields[k] = structpb.NewStringValue(v)
			}
			msg.Attributes = map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: fields}}
		}
		if err := x.send(msg); err != nil {
			return failure(err)
		}
		r, err := x.recv("request_headers")
		if err != nil {
			return x.ended(err)
		}
		if err := x.override(r.ModeOverride); err != nil {
			return failure(err)
		}
		if err := hdr.apply(r.GetRequestHeaders().GetResponse().GetHeaderMutation()); err != nil {
			return failure(err)
		}
		x.routeCleared = x.routeCleared || r.GetRequestHeaders().GetResponse().GetClearRouteCache()
	}

	// Request body.
	body, err := x.requestBody(hdr, chunks, whole, trailers)
	if err != nil {
		return x.ended(err)
	}

	// Request trailers.
	var upTrailers http.Header
	if trailers {
		th := newHeaders()
		for _, h := range req.Trailers {
			th.add(h[0], h[1])
		}
		if x.m.requestTrailers {
			if err := x.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
				RequestTrailers: &extprocv3.HttpTrailers{Trailers: th.proto()}}}); err != nil {
				return failure(err)
			}
			r, err := x.recv("request_trailers")
			if err != nil {
				return x.ended(err)
			}
			if err := th.apply(r.GetRequestTrailers().GetHeaderMutation()); err != nil {
				return failure(err)
			}
		}
		upTrailers = th.http()
	}

	// The upstream.
	if upstream == nil {
		return failure(errors.New("envoytest: the request reached an upstream the test did not expect to be called"))
	}
	ur := &UpstreamRequest{Header: hdr.http(), Body: body, Trailers: upTrailers, RouteCleared: x.routeCleared}
	up := upstream(ur)
	out := &Response{Upstream: ur, Header: http.Header{}}
	if up.CutBeforeHeaders {
		disconnect()
		out.Cut = true
		return out
	}
	details := "via_upstream"
	rh := newHeaders()
	if up.EnvoyReply != "" {
		// Envoy's own reply, in place of the upstream's: text/plain,
		// without the router's x-envoy-upstream-service-time.
		details = up.EnvoyReply
		status, text := http.StatusServiceUnavailable, "upstream connect error or disconnect/reset before headers"
		if up.EnvoyReply == "response_timeout" {
			status, text = http.StatusGatewayTimeout, "upstream request timeout"
		}
		up = UpstreamResponse{Status: status, Chunks: [][]byte{[]byte(text)},
			Headers: [][2]string{{"content-type", "text/plain"}, {"content-length", strconv.Itoa(len(text))}}}
	}
	rh.add(":status", strconv.Itoa(up.Status))
	for _, h := range up.Headers {
		rh.add(h[0], h[1])
	}
	if details == "via_upstream" {
		rh.add("x-envoy-upstream-service-time", "1")
	}
	if x.m.responseHeaders {
		msg := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
			ResponseHeaders: &extprocv3.HttpHeaders{Headers: rh.proto(), EndOfStream: len(up.Chunks) == 0}}}
		if x.f.ResponseAttributes {
			msg.Attributes = map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {
				Fields: map[string]*structpb.Value{"response.code_details": structpb.NewStringValue(details)}}}
		}
		if err := x.send(msg); err != nil {
			return failure(err)
		}
		r, err := x.recv("response_headers")
		if err != nil {
			return x.ended(err)
		}
		if err := x.override(r.ModeOverride); err != nil {
			return failure(err)
		}
		if err := rh.apply(r.GetResponseHeaders().GetResponse().GetHeaderMutation()); err != nil {
			return failure(err)
		}
	}
	out.Status = up.Status
	out.Header = rh.http()
	out.Header.Del(":status")
	if up.CutAfterHeaders {
		disconnect()
		out.Cut = true
		return out
	}

	// Response body, pipelined.
	if len(up.Chunks) == 0 {
		return out
	}
	if x.m.responseBody == filterv3.ProcessingMode_NONE {
		for _, c := range up.Chunks {
			out.Body = append(out.Body, c...)
		}
		return out
	}
	if x.m.responseBody != filterv3.ProcessingMode_STREAMED {
		return failure(fmt.Errorf("envoytest models only STREAMED response bodies, got %v", x.m.responseBody))
	}
	n := len(up.Chunks)
	if up.CutAfter > 0 && up.CutAfter < n {
		n = up.CutAfter
	}
	sent := up.Chunks[:n]
	if up.DuplicateEnd && n == len(up.Chunks) {
		// The empty chunk carries the second end_of_stream.
		sent = append(sent[:n:n], nil)
	}
	sendErr := make(chan error, 1)
	go func() {
		for i, c := range sent {
			err := x.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{Body: c, EndOfStream: i >= len(up.Chunks)-1}}})
			if err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	for _, chunk := range sent {
		r, err := x.recv("response_body")
		if err != nil {
			return x.ended(err)
		}
		if bm := r.GetResponseBody().GetResponse().GetBodyMutation(); bm != nil {
			switch m := bm.Mutation.(type) {
			case *extprocv3.BodyMutation_Body:
				chunk = m.Body
			case *extprocv3.BodyMutation_ClearBody:
				chunk = nil
			default:
				return failure(fmt.Errorf("body mutation %T is not valid in STREAMED mode", bm.Mutation))
			}
		}
		out.Body = append(out.Body, chunk...)
	}
	if err := <-sendErr; err != nil {
		return failure(err)
	}
	if n < len(up.Chunks) {
		disconnect()
		out.Cut = true
	}
	return out
}

// requestBody sends the request body in the current mode and returns
// what the upstream receives of it.
func (x *exchange) requestBody(hdr *headers, chunks [][]byte, whole []byte, trailers bool) ([]byte, error) {
	if len(whole) == 0 {
		return nil, nil
	}
	switch x.m.requestBody {
	case filterv3.ProcessingMode_NONE:
		return whole, nil
	case filterv3.ProcessingMode_STREAMED:
		return x.streamedBody(hdr, chunks, trailers)
	case filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED_PARTIAL:
	default:
		return nil, fmt.Errorf("envoytest does not model request body mode %v", x.m.requestBody)
	}
	sent, rest, eos := whole, []byte(nil), !trailers
	if x.m.requestBody == filterv3.ProcessingMode_BUFFERED_PARTIAL {
		limit := x.f.PartialLimit
		if limit <= 0 {
			limit = 1 << 20
		}
		if len(whole) > limit {
			sent, rest, eos = whole[:limit], whole[limit:], false
		}
	}
	if err := x.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: sent, EndOfStream: eos}}}); err != nil {
		return nil, err
	}
	r, err := x.recv("request_body")
	if err != nil {
		return nil, err
	}
	common := r.GetRequestBody().GetResponse()
	if err := hdr.apply(common.GetHeaderMutation()); err != nil {
		return nil, err
	}
	x.routeCleared = x.routeCleared || common.GetClearRouteCache()
	body := sent
	if bm := common.GetBodyMutation(); bm != nil {
		switch m := bm.Mutation.(type) {
		case *extprocv3.BodyMutation_Body:
			body = m.Body
		case *extprocv3.BodyMutation_ClearBody:
			body = nil
		default:
			return nil, fmt.Errorf("body mutation %T is not valid in BUFFERED mode", bm.Mutation)
		}
		if cl, ok := hdr.get("content-length"); ok && rest == nil && cl != strconv.Itoa(len(body)) {
			return nil, fmt.Errorf("content-length %s does not match the mutated body's %d bytes", cl, len(body))
		}
	}
	return append(append([]byte(nil), body...), rest...), nil
}

// streamedBody sends a STREAMED request body, pipelined, and returns what
// the upstream receives: each chunk as its reply leaves it. A reply's
// header mutation is ignored; a content-length that no longer matches
// the body fails the request, as an upstream codec would.
func (x *exchange) streamedBody(hdr *headers, chunks [][]byte, trailers bool) ([]byte, error) {
	sendErr := make(chan error, 1)
	go func() {
		for i, c := range chunks {
			err := x.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
				RequestBody: &extprocv3.HttpBody{Body: c, EndOfStream: i == len(chunks)-1 && !trailers}}})
			if err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	var body []byte
	for _, c := range chunks {
		r, err := x.recv("request_body")
		if err != nil {
			return nil, err
		}
		if bm := r.GetRequestBody().GetResponse().GetBodyMutation(); bm != nil {
			switch m := bm.Mutation.(type) {
			case *extprocv3.BodyMutation_Body:
				c = m.Body
			case *extprocv3.BodyMutation_ClearBody:
				c = nil
			default:
				return nil, fmt.Errorf("body mutation %T is not valid in STREAMED mode", bm.Mutation)
			}
		}
		body = append(body, c...)
	}
	if err := <-sendErr; err != nil {
		return nil, err
	}
	if cl, ok := hdr.get("content-length"); ok && cl != strconv.Itoa(len(body)) {
		return nil, fmt.Errorf("content-length %s does not match the %d body bytes the upstream got", cl, len(body))
	}
	return body, nil
}

// ended turns an error awaiting a reply into the client's response.
func (x *exchange) ended(err error) *Response {
	var im errImmediate
	if !errors.As(err, &im) {
		return failure(err)
	}
	ir := im.r
	h := newHeaders()
	if err := h.apply(ir.GetHeaders()); err != nil {
		return failure(err)
	}
	status := int(ir.GetStatus().GetCode())
	if status == 0 {
		status = 200
	}
	return &Response{Status: status, Header: h.http(), Body: ir.Body, Local: true, Details: ir.Details}
}

// override applies a mode_override the way Envoy does: both body modes
// are taken from it, header modes only when not DEFAULT.
func (x *exchange) override(o *filterv3.ProcessingMode) error {
	if o == nil {
		return nil
	}
	x.m.requestBody = o.RequestBodyMode
	x.m.responseBody = o.ResponseBodyMode
	switch o.ResponseHeaderMode {
	case filterv3.ProcessingMode_SKIP:
		x.m.responseHeaders = false
	case filterv3.ProcessingMode_SEND:
		x.m.responseHeaders = true
	}
	return nil
}

// headers is an ordered, multi-valued header list.
type headers struct{ kv [][2]string }

func newHeaders() *headers { return &headers{} }

func (h *headers) add(k, v string) { h.kv = append(h.kv, [2]string{strings.ToLower(k), v}) }

func (h *headers) has(k string) bool { _, ok := h.get(k); return ok }

func (h *headers) get(k string) (string, bool) {
	for _, e := range h.kv {
		if e[0] == k {
			return e[1], true
		}
	}
	return "", false
}

func (h *headers) del(k string) {
	out := h.kv[:0]
	for _, e := range h.kv {
		if e[0] != k {
			out = append(out, e)
		}
	}
	h.kv = out
}

func (h *headers) proto() *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for _, e := range h.kv {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: e[0], RawValue: []byte(e[1])})
	}
	return m
}

func (h *headers) http() http.Header {
	out := http.Header{}
	for _, e := range h.kv {
		out.Add(e[0], e[1])
	}
	return out
}

// immutable headers that a mutation may not set.
func immutable(k string) bool {
	switch k {
	case "host", ":authority", ":scheme", ":method":
		return true
	}
	return strings.HasPrefix(k, "x-envoy-")
}

// apply applies a header mutation with Envoy's rules.
func (h *headers) apply(m *extprocv3.HeaderMutation) error {
	if m == nil {
		return nil
	}
	for _, k := range m.RemoveHeaders {
		h.del(strings.ToLower(k))
	}
	for _, o := range m.SetHeaders {
		hv := o.GetHeader()
		k := hv.GetKey()
		if k == "" || k != strings.ToLower(k) {
			return fmt.Errorf("invalid header key %q", k)
		}
		if hv.Value != "" && len(hv.RawValue) > 0 {
			return fmt.Errorf("header %q sets both value and raw_value", k)
		}
		v := string(hv.RawValue) // a value-only header becomes empty
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("header %q has an invalid character", k)
		}
		if immutable(k) {
			continue
		}
		if !o.GetAppend().GetValue() {
			h.del(k)
		}
		h.add(k, v)
	}
	return nil
}

// IsReplyTo reports whether r is a reply of the kind Envoy awaits for a
// message of kind ("request_headers", "request_body", "request_trailers",
// "response_headers", "response_body"): any other is spurious, and fails
// the request.
func IsReplyTo(kind string, r *extprocv3.ProcessingResponse) bool {
	switch kind {
	case "request_headers":
		return r.GetRequestHeaders() != nil
	case "request_body":
		return r.GetRequestBody() != nil
	case "request_trailers":
		return r.GetRequestTrailers() != nil
	case "response_headers":
		return r.GetResponseHeaders() != nil
	case "response_body":
		return r.GetResponseBody() != nil
	}
	return false
}
