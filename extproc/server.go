package extproc

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	requesttrace "golang.org/x/net/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// Options configure a Server. Limiter is required; the zero value of
// every other field is its default, except for the two Inject fields,
// whose zero value turns the edit off.
type Options struct {
	Limiter  *accounting.Limiter
	Identity Identity
	// Counter counts the tokens of request text and images and of
	// streamed output; nil means the calibrated approximation. The config
	// package builds it from a file's estimation section.
	Counter TokenCounter
	// DefaultOutputCap is the output cap of a request that names none;
	// zero means DefaultOutputCap, and it may not exceed MaxOutputCap.
	DefaultOutputCap int64
	// InjectOutputCap adds the API's output-cap field to requests that
	// have none, so the reservation bounds the spend.
	InjectOutputCap bool
	// InjectStreamUsage asks OpenAI-style streams to report usage.
	InjectStreamUsage bool
	// StripAcceptEncoding removes accept-encoding from metered requests,
	// so providers answer uncompressed and the server reads usage without
	// decompressing. Compressed responses are read either way.
	StripAcceptEncoding bool
	// CountOtherPaths puts requests on paths that are not an LLM API's
	// (see classify) through identity and the limits, as requests of API
	// "other" on the requests and concurrent dimensions. Off, such a
	// request passes untouched: no identity required, nothing reserved,
	// no header changed but a client's RouteModelHeader, so that a
	// filter that reaches other applications' routes leaves them alone.
	CountOtherPaths bool
	// AllowUnmetered lets the calls of the named unmetered path
	// families (see [UnmeteredFamilies]) through, counted on the
	// requests and concurrent dimensions as requests of API <family>;
	// any other such call is refused with a 403, since what it spends
	// cannot be reserved. nil allows none.
	AllowUnmetered map[string]bool
	// MaxBuffer bounds what a usage reader keeps of a response (a JSON
	// body, one SSE event); zero means DefaultMaxBuffer.
	MaxBuffer int
	// RequestBytes bounds the request bodies the server holds at once,
	// in all and per principal; the zero value derives the bounds from
	// the memory the process is given.
	RequestBytes RequestBytes
	// HiddenReasoningModels are model patterns ('*' matches any run of
	// characters) of models that reason without streaming their
	// reasoning: a response of theirs that reports no usage is charged
	// its whole output cap, not the output seen. nil means
	// DefaultHiddenReasoningModels; an empty, non-nil slice means none.
	HiddenReasoningModels []string
	// ContextWindows are the models' context windows, in tokens, by model
	// name, family, pattern ("gemini-2.5*") or "default", resolved as
	// prices are (accounting.ResolveModel): a usage report is held to
	// input no larger than the request's model's, and to output no
	// larger than its cap (see llm.Request.UsageBound). A model none
	// matches has DefaultContextWindow.
	ContextWindows map[string]int64
	// RefuseBackground refuses Responses API requests with "background":
	// true (400). Admitted, they keep their whole reservation: their
	// usage is never in the reply.
	RefuseBackground bool
	// AzureDeployments maps Azure OpenAI deployment names (the {d} of
	// /openai/deployments/{d}/…) to the model each serves. An unlisted
	// deployment is priced and matched under its own name.
	AzureDeployments map[string]string
	// ServiceTierFactors scale a model's price for the processing tier a
	// request asks for (OpenAI's "service_tier"). nil means
	// DefaultServiceTierFactors. A tier not listed (and not "", "auto",
	// "default") is priced at the largest factor listed: a new tier must
	// not be cheaper than the dearest known one.
	ServiceTierFactors map[string]float64
	// LearnedOutput reserves a learned estimate of a request's output in
	// place of its whole output cap; off unless Enabled.
	LearnedOutput LearnedOutput
	// IETFRateLimitHeaders adds RateLimit-Policy and RateLimit (the IETF
	// draft's structured fields) beside the x-ratelimit-* headers.
	IETFRateLimitHeaders bool
	// NoAnthropicRateLimitHeaders leaves out the anthropic-ratelimit-*
	// headers tokenwarden sets on Anthropic routes (in place of the
	// provider's, which are removed either way).
	NoAnthropicRateLimitHeaders bool
	// ShouldRetryMax is the longest wait a 429 invites the client to
	// retry after: a longer one says x-should-retry: false and names the
	// time the limit resets. Zero means DefaultShouldRetryMax; negative
	// means never (every 429 with a reset time invites a retry).
	ShouldRetryMax time.Duration
	Logger         *slog.Logger
	Registerer     prometheus.Registerer

	// TracerProvider receives a span for each request's decision and one
	// for its settlement, in the trace the request came with (see the
	// package doc's Tracing); nil means no tracing, at no cost per
	// request.
	TracerProvider trace.TracerProvider
	// TraceAttributes are the identity attributes whose values the spans
	// carry; none by default, since they identify callers.
	TraceAttributes []string
}

// DefaultOutputCap is the output cap of a request that names none, when
// Options.DefaultOutputCap is zero: what a request without max_tokens
// reserves for its output (and has injected).
const DefaultOutputCap = 4096

// DefaultContextWindow is the context window of a model that
// Options.ContextWindows does not name: generous, above every model's
// today (Llama 4 Scout's is ten million tokens), so that it bounds only
// a report no model could have produced, such as "prompt_tokens": 1e30.
const DefaultContextWindow = 10_000_000

// MaxOutputCap is the largest Options.DefaultOutputCap: providers read an
// output cap as a 32-bit integer, and an injected one must be one they
// accept.
const MaxOutputCap = math.MaxInt32

// DefaultMaxBuffer is what a usage reader keeps of a response at most
// when Options.MaxBuffer is zero: 4 MiB, enough for the longest event
// that carries usage.
const DefaultMaxBuffer = llm.DefaultMaxBuffer

// DefaultHiddenReasoningModels are the model families known to reason
// without streaming their reasoning in full: OpenAI's o-series and
// GPT-5, Gemini 2.5 and later (thinking on by default, thoughts not
// returned unless asked for), xAI's Grok reasoning models. Claude and
// Bedrock's models reason only when the request turns thinking on, which
// the wire formats see in the body.
var DefaultHiddenReasoningModels = []string{
	"o1*", "o3*", "o4*", "gpt-5*", "codex-*",
	"gemini-2.5*", "gemini-3*",
	"grok-3-mini*", "grok-4*",
}

// TokenCounter counts what a request's content costs in tokens: text,
// and images by the provider's formula. It is the one seam through which
// every wire format counts; the server's own is the configured tokenizer.
type TokenCounter = llm.Counter

// DefaultServiceTierFactors price OpenAI's processing tiers against the
// standard one: "priority" at twice the price (OpenAI lists it at about
// 1.75–2×), "flex" and "scale" at the standard price (flex is billed at
// half: charging it the full price errs on the side of the budget).
var DefaultServiceTierFactors = map[string]float64{"priority": 2, "flex": 1, "scale": 1}

// priceFactor returns the price factor of a request's service tier.
func (s *Server) priceFactor(tier string) float64 {
	switch tier {
	case "", "auto", "default", "standard":
		return 1
	}
	factors := s.opts.ServiceTierFactors
	if factors == nil {
		factors = DefaultServiceTierFactors
	}
	if f, ok := factors[tier]; ok {
		return f
	}
	most := 1.0
	for _, f := range factors {
		most = max(most, f)
	}
	return most
}

// Server implements Envoy's ExternalProcessor service.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	opts      Options
	log       *slog.Logger
	m         *metrics
	bb        *bodyBytes // shared with the Servers Reload makes
	reasoning []string   // compiled HiddenReasoningModels
	learned   *learner   // nil unless LearnedOutput is on
	lm        *learnedMetrics
	// warnedObservability: the observability-mode warning was logged.
	warnedObservability atomic.Bool
	// live is the Server that new streams run on after a Reload; nil
	// until the first.
	live atomic.Pointer[Server]

	tracer trace.Tracer // nil: tracing is off
}

// NewServer returns a Server. It fails without a Limiter, or if
// [Options.Validate] finds a problem.
func NewServer(opts Options) (*Server, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return newServer(opts, newMetrics(opts.Registerer), newLearnedMetrics(opts.Registerer), newBodyBytes(opts.Registerer), nil)
}

// check reports what keeps opts from making a Server.
func (opts *Options) check() error {
	if opts.Limiter == nil {
		return errors.New("extproc: no limiter")
	}
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("extproc: invalid options: %w", err)
	}
	return nil
}

// newServer returns a Server of opts, which check accepted, counting in
// m and lm and charging request bodies to bb: NewServer's own, or those
// a Server shares with the ones Reload makes, whose limits it sets to
// opts'. It keeps prev, the learner of the Server it replaces, when opts
// ask for the same estimator: a reload is no reason to learn again.
func newServer(opts Options, m *metrics, lm *learnedMetrics, bb *bodyBytes, prev *learner) (*Server, error) {
	if opts.Counter == nil {
		opts.Counter = tokenizer.Default()
	}
	opts.DefaultOutputCap = cmp.Or(opts.DefaultOutputCap, DefaultOutputCap)
	reasoning := opts.HiddenReasoningModels
	if reasoning == nil {
		reasoning = DefaultHiddenReasoningModels
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, m: m, bb: bb, reasoning: reasoning, lm: lm, tracer: newTracer(opts.TracerProvider)}
	s.learned = prev
	if !prev.sameEstimator(opts.LearnedOutput) {
		learned, err := newLearner(opts.LearnedOutput, lm)
		if err != nil {
			return nil, fmt.Errorf("extproc: invalid options: %w", err)
		}
		s.learned = learned
	}
	lm.live.Store(s.learned)
	bb.setLimits(&s.opts)
	return s, nil
}

// hiddenReasoning reports whether model belongs to a family that reasons
// without streaming it. The model is also read as its family
// (accounting.ModelFamily): without a provider prefix ("openai/o3"), as
// a fine-tune's base ("ft:o4-mini-2025-04-16:acme::id" is o4-mini).
func (s *Server) hiddenReasoning(model string) bool {
	family := accounting.ModelFamily(model)
	for _, p := range s.reasoning {
		if tokenizer.MatchModel(p, model) || tokenizer.MatchModel(p, family) {
			return true
		}
	}
	return false
}

// warnObservabilityMode logs, once, that Envoy runs the filter in
// observability mode: it does not wait for the server's replies, so no
// limit is enforced.
func (s *Server) warnObservabilityMode() {
	if s.warnedObservability.CompareAndSwap(false, true) {
		s.log.Error("the ext_proc filter runs in observability_mode: Envoy ignores tokenwarden's replies and no limit is enforced; turn observability_mode off")
	}
}

// Process handles one HTTP request's stream. Envoy sends messages in
// order and needs exactly one reply to each, in order; STREAMED body
// chunks arrive pipelined, and answering them one by one in arrival order
// meets that.
func (s *Server) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	// Before the stream's deep work, while the stack is shallow (see
	// growStack).
	_ = growStack(0)
	// The stream runs on the options in force now, to its end.
	s = s.current()
	s.m.streams.Inc()
	defer s.m.streams.Dec()
	st := newStream(s, srv.Context())
	st.out = srv
	// grpc-go's request tracing keeps the messages sent (see lend.go).
	// Whether it traces this stream it decided when the stream began,
	// and says so in the stream's context: grpc.EnableTracing, read now,
	// may have changed since. (The lookup costs an allocation: x/net/trace
	// boxes its key.)
	_, st.noLend = requesttrace.FromContext(srv.Context())
	// Whatever ends the stream, an admitted request settles: a cancelled
	// stream is how Envoy reports a client that went away.
	defer st.finish()
	for {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		resp, last := st.handle(req)
		if resp == nil {
			return status.Error(codes.InvalidArgument, "unexpected ext_proc message")
		}
		err = srv.Send(resp)
		// Sent or not, the reply is done with what it borrowed, and
		// with the request body if it was the decision's.
		st.sent()
		st.replied()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		if last {
			// Envoy closes the stream after an immediate response.
			return nil
		}
	}
}

// MaxMessageBytes is the largest gRPC message the server accepts. The
// default of 4 MiB would turn a large buffered request body into an
// ext_proc error, and Envoy into a 500; bodies beyond Envoy's own buffer
// limit never reach the server (Envoy answers 413).
const MaxMessageBytes = 64 << 20

// GRPCServerOptions are the options a grpc.Server hosting this service
// needs, apart from the server's own (see [Server.ServerOptions]).
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		// Stop waits for handlers, so that streams cut by shutdown still
		// settle before the process exits.
		grpc.WaitForHandlers(true),
	}
}

// ServerOptions are GRPCServerOptions plus the interceptor that keeps a
// panic in one stream from taking the process down, and the codec that
// decodes Envoy's messages by hand and sends tokenwarden's replies
// without encoding them again (see codec.go; it leaves every other
// message to grpc-go's protobuf codec). Create the grpc.Server
// that hosts srv with them (and any of your own), then [Register] srv on
// it.
//
// The codec is forced (grpc.ForceServerCodecV2): it answers every call
// to the server, whatever its content-subtype. A host serving services
// of its own beside this one through a codec it registered for another
// subtype should serve them from a grpc.Server of their own; a host's
// own forced codec, passed after these options, replaces this one, and
// tokenwarden then decodes with it.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return append(GRPCServerOptions(),
		grpc.ChainStreamInterceptor(s.recoverStream),
		grpc.ForceServerCodecV2(newCodec()))
}

// Register registers srv's ExternalProcessor service on gs, which must
// have been created with srv.ServerOptions(), together with the gRPC
// health service that Envoy's grpc_health_check asks, reporting the
// server ("") and the ExternalProcessor service SERVING. Call it once,
// before gs serves, on a gs without a health service of its own: grpc
// treats registering a service twice as fatal.
//
// It returns the health server: call its Shutdown when the process
// starts to drain, so that health checks answer NOT_SERVING and Envoy
// sends new requests elsewhere while in-flight streams finish.
func Register(gs *grpc.Server, srv *Server) *health.Server {
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return hs
}

// recoverStream turns a panic in a stream's handler into an Internal
// error for that stream alone: Envoy answers that one request with its
// status_on_error (a 500, failing closed), and the process — with every
// other stream, and the memory store's counters — stays up. The handler
// has settled its reservation by then (its deferred finish runs while
// the panic unwinds).
func (s *Server) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.m.panics.Inc()
			s.log.Error("panic in stream handler; failing the stream", "method", info.FullMethod,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, "tokenwarden: internal error")
		}
	}()
	return handler(srv, ss)
}
