package extproc_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/metadata"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// The trace a request comes with: a client's, in its traceparent header,
// and Envoy's span for the ext_proc call, in the stream's metadata.
const (
	clientTrace  = "0af7651916cd43dd8448eb211c80319c"
	clientSpan   = "b7ad6b7169203331"
	clientParent = "00-" + clientTrace + "-" + clientSpan + "-01"
	envoySpan    = "00f067aa0ba902b7"
	envoyParent  = "00-" + clientTrace + "-" + envoySpan + "-01"
)

// withRecorder has the server trace into a span recorder.
func withRecorder(sr *tracetest.SpanRecorder, attrs ...string) rigOption {
	return withServer(func(o *extproc.Options) {
		o.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		o.TraceAttributes = attrs
	})
}

// spans returns the recorded spans by name; each name must occur once.
func spans(t *testing.T, sr *tracetest.SpanRecorder) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if _, dup := out[s.Name()]; dup {
			t.Errorf("span %s recorded twice", s.Name())
		}
		out[s.Name()] = s
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs checks span attributes by their value's string form.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := attr(s, k)
		if !ok {
			t.Errorf("%s: no attribute %s, want %q", s.Name(), k, v)
		} else if got.Emit() != v {
			t.Errorf("%s: attribute %s: got %q, want %q", s.Name(), k, got.Emit(), v)
		}
	}
}

// wantParent checks that s is in trace traceID under span parentID.
func wantParent(t *testing.T, s sdktrace.ReadOnlySpan, traceID, parentID string) {
	t.Helper()
	if got := s.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("%s: trace ID: got %s, want %s", s.Name(), got, traceID)
	}
	if got := s.Parent().SpanID().String(); got != parentID {
		t.Errorf("%s: parent span ID: got %s, want %s", s.Name(), got, parentID)
	}
}

var streamedChat = []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"Summarise TS 23.501."}]}`)

func tracedChat(tenant string, headers ...[2]string) envoytest.Request {
	req := chatRequest(tenant, streamedChat)
	req.Headers = append(req.Headers, [2]string{"x-user-id", "user-42"})
	req.Headers = append(req.Headers, headers...)
	return req
}

func TestTraceAdmittedAndSettled(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")}, withRecorder(sr))
	resp := r.envoy.Do(t.Context(), tracedChat("a", [2]string{"traceparent", clientParent}),
		sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
	wantStatus(t, resp, 200)
	r.envoy.Wait()

	got := spans(t, sr)
	dec, set := got[extproc.SpanDecision], got[extproc.SpanSettlement]
	if dec == nil || set == nil || len(got) != 2 {
		t.Fatalf("got spans %v, want a decision and a settlement", keys(got))
	}
	wantParent(t, dec, clientTrace, clientSpan)
	wantParent(t, set, clientTrace, clientSpan)
	wantAttrs(t, dec, map[string]string{
		extproc.AttrAPI: "openai.chat", extproc.AttrModel: "gpt-4o-mini", extproc.AttrOutcome: "admitted",
	})
	if est, _ := attr(dec, extproc.AttrEstimateTokens); est.AsInt64() <= 500 {
		t.Errorf("estimate tokens: got %d, want the input and the 500 cap", est.AsInt64())
	}
	if d, ok := attr(dec, extproc.AttrStoreDurationMs); !ok || d.AsFloat64() <= 0 {
		t.Errorf("store duration: got %v (present %v), want a positive figure", d.AsFloat64(), ok)
	}
	if _, ok := attr(dec, extproc.AttrLimit); ok {
		t.Errorf("an admitted request's decision names a limit")
	}
	res, _ := attr(dec, extproc.AttrReservation)
	wantAttrs(t, set, map[string]string{
		extproc.AttrBasis: "usage", extproc.AttrComplete: "true", extproc.AttrActualTokens: "224",
		extproc.AttrStatus: "200", extproc.AttrReservation: res.AsString(),
	})
	// gpt-4o-mini at $0.15 / $0.60 per million tokens; what the fixture
	// reports is priced by the accounting package's own tests.
	if c, _ := attr(set, extproc.AttrActualCost); c.AsFloat64() <= 0 || c.AsFloat64() > 0.001 {
		t.Errorf("actual cost: got %v USD, want a few hundredths of a cent", c.AsFloat64())
	}
	if set.StartTime().Before(dec.EndTime()) {
		t.Errorf("settlement began %v before the decision ended", dec.EndTime().Sub(set.StartTime()))
	}
}

func TestTraceParentFromEnvoy(t *testing.T) {
	tests := []struct {
		name     string
		header   string // the request's traceparent
		metadata string // the ext_proc stream's
		parent   string
	}{
		{"request header only", clientParent, "", clientSpan},
		{"envoy's span is preferred", clientParent, envoyParent, envoySpan},
		{"envoy's span alone", "", envoyParent, envoySpan},
		{"a malformed metadata value falls back to the header", clientParent, "00-zz-zz-01", clientSpan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")}, withRecorder(sr))
			ctx := t.Context()
			if tt.metadata != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", tt.metadata)
			}
			var h [][2]string
			if tt.header != "" {
				h = append(h, [2]string{"traceparent", tt.header})
			}
			resp := r.envoy.Do(ctx, tracedChat("a", h...), sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
			wantStatus(t, resp, 200)
			r.envoy.Wait()
			got := spans(t, sr)
			for _, name := range []string{extproc.SpanDecision, extproc.SpanSettlement} {
				if s := got[name]; s == nil {
					t.Errorf("no %s span", name)
				} else {
					wantParent(t, s, clientTrace, tt.parent)
				}
			}
		})
	}
}

func TestTraceWithoutParent(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")}, withRecorder(sr))
	resp := r.envoy.Do(t.Context(), tracedChat("a"), sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
	wantStatus(t, resp, 200)
	r.envoy.Wait()
	got := spans(t, sr)
	dec, set := got[extproc.SpanDecision], got[extproc.SpanSettlement]
	if dec == nil || set == nil {
		t.Fatalf("got spans %v, want a decision and a settlement", keys(got))
	}
	if dec.Parent().IsValid() {
		t.Errorf("decision: got parent %s, want a root span", dec.Parent().SpanID())
	}
	// The settlement joins the decision's trace.
	wantParent(t, set, dec.SpanContext().TraceID().String(), dec.SpanContext().SpanID().String())
}

func TestTraceUnsampledParent(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")}, withRecorder(sr))
	unsampled := strings.TrimSuffix(clientParent, "-01") + "-00"
	resp := r.envoy.Do(t.Context(), tracedChat("a", [2]string{"traceparent", unsampled}),
		sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
	wantStatus(t, resp, 200)
	r.envoy.Wait()
	if got := sr.Ended(); len(got) != 0 {
		t.Errorf("got %d spans, want none: the trace's own sampling decision stands", len(got))
	}
}

func TestTraceRejected(t *testing.T) {
	tests := []struct {
		name    string
		limit   int64 // each request reserves about 510 tokens
		outcome string
	}{
		{"too little left", 600, "rejected"},
		{"larger than the limit", 100, "never_fits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", tt.limit, "tenant")}, withRecorder(sr))
			if tt.outcome == "rejected" {
				// Another trace takes most of the limit, and holds it
				// (its upstream never answers).
				r.envoy.Do(t.Context(), tracedChat("a"), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
					return envoytest.UpstreamResponse{CutBeforeHeaders: true}
				})
				r.envoy.Wait()
			}
			resp := r.envoy.Do(t.Context(), tracedChat("a", [2]string{"traceparent", clientParent}), jsonUpstream(200, nil))
			wantStatus(t, resp, 429)
			r.envoy.Wait()
			var dec sdktrace.ReadOnlySpan
			n := 0
			for _, s := range sr.Ended() {
				if s.SpanContext().TraceID().String() == clientTrace {
					dec, n = s, n+1
				}
			}
			if n != 1 || dec.Name() != extproc.SpanDecision {
				t.Fatalf("got %d spans in the request's trace, want its decision alone", n)
			}
			wantParent(t, dec, clientTrace, clientSpan)
			wantAttrs(t, dec, map[string]string{
				extproc.AttrOutcome: tt.outcome, extproc.AttrLimit: "tenant-tokens", extproc.AttrModel: "gpt-4o-mini",
			})
			if _, ok := attr(dec, extproc.AttrRetryAfterMs); !ok {
				t.Errorf("a rejection's decision has no %s", extproc.AttrRetryAfterMs)
			}
			if dec.Status().Code == otelcodes.Error {
				t.Errorf("a rejection is the limiter doing its job, not an error: got status %v", dec.Status())
			}
		})
	}
}

func TestTraceRefusals(t *testing.T) {
	tests := []struct {
		name    string
		req     envoytest.Request
		outcome string
		status  int
	}{
		{"bad body", chatRequest("a", []byte(`{"model":`)), "bad_request", 400},
		{"no tenant", envoytest.Request{Path: "/v1/chat/completions", Body: streamedChat}, "unauthenticated", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")}, withRecorder(sr))
			tt.req.Headers = append(tt.req.Headers, [2]string{"traceparent", clientParent})
			resp := r.envoy.Do(t.Context(), tt.req, jsonUpstream(200, nil))
			wantStatus(t, resp, tt.status)
			r.envoy.Wait()
			got := spans(t, sr)
			dec := got[extproc.SpanDecision]
			if dec == nil || len(got) != 1 {
				t.Fatalf("got spans %v, want the decision alone", keys(got))
			}
			wantParent(t, dec, clientTrace, clientSpan)
			wantAttrs(t, dec, map[string]string{extproc.AttrOutcome: tt.outcome})
		})
	}
}

func TestTraceStoreUnavailable(t *testing.T) {
	allow := tokensLimit("tenant-tokens", 100000, "tenant")
	allow.OnStoreError = accounting.FailOpen
	tests := []struct {
		name    string
		limit   accounting.Limit
		status  int
		outcome string
		failed  bool // the decision span's status is an error
	}{
		{"deny: refused", tokensLimit("tenant-tokens", 100000, "tenant"), 503, "unavailable", true},
		{"allow: admitted unreserved", allow, 200, "failed_open", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			r := newRig(t, []accounting.Limit{tt.limit}, withRecorder(sr), withStore(failingStore{}))
			resp := r.envoy.Do(t.Context(), tracedChat("a", [2]string{"traceparent", clientParent}),
				sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
			wantStatus(t, resp, tt.status)
			r.envoy.Wait()
			dec := spans(t, sr)[extproc.SpanDecision]
			if dec == nil {
				t.Fatal("no decision span")
			}
			wantAttrs(t, dec, map[string]string{extproc.AttrOutcome: tt.outcome})
			if failed := dec.Status().Code == otelcodes.Error; failed != tt.failed {
				t.Errorf("status: got %v, want an error %v", dec.Status(), tt.failed)
			}
		})
	}
}

// TestTraceCutStream: a client that leaves mid-stream still gets its
// settlement span, in the request's trace, although the ext_proc stream
// (and its context) is gone by then.
func TestTraceCutStream(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")}, withRecorder(sr))
	resp := r.envoy.Do(t.Context(), tracedChat("a", [2]string{"traceparent", clientParent}),
		sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 16, 3))
	if !resp.Cut {
		t.Fatal("the response was not cut")
	}
	r.envoy.Wait()
	set := spans(t, sr)[extproc.SpanSettlement]
	if set == nil {
		t.Fatal("no settlement span for a cut stream")
	}
	wantParent(t, set, clientTrace, clientSpan)
	wantAttrs(t, set, map[string]string{extproc.AttrBasis: "estimate", extproc.AttrComplete: "false"})
}

// TestTraceIdentity: identity values stay out of spans unless named.
func TestTraceIdentity(t *testing.T) {
	tests := []struct {
		name  string
		attrs []string
		want  map[string]string // identity attributes in the decision
	}{
		{"none by default", nil, map[string]string{}},
		{"tenant named", []string{"tenant"}, map[string]string{extproc.AttrIdentityPrefix + "tenant": "acme"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")}, withRecorder(sr, tt.attrs...))
			resp := r.envoy.Do(t.Context(), tracedChat("acme", [2]string{"traceparent", clientParent}),
				sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
			wantStatus(t, resp, 200)
			r.envoy.Wait()
			for _, s := range sr.Ended() {
				for _, kv := range s.Attributes() {
					v := kv.Value.Emit()
					if _, named := tt.want[string(kv.Key)]; !named && (v == "acme" || v == "user-42") {
						t.Errorf("%s: attribute %s carries the identity value %q", s.Name(), kv.Key, v)
					}
				}
				if s.Name() == extproc.SpanDecision {
					wantAttrs(t, s, tt.want)
				}
			}
		})
	}
}

func TestTraceAttributesValidated(t *testing.T) {
	o := extproc.Options{Identity: tenantIdentity, TraceAttributes: []string{"tenant", "team"}}
	err := o.Validate()
	var fe *accounting.FieldError
	if !errors.As(err, &fe) || fe.Field != "tracing.attributes[1]" {
		t.Fatalf("got %v, want a problem with tracing.attributes[1]", err)
	}
	o.TraceAttributes = []string{"user"}
	if err := o.Validate(); err != nil {
		t.Errorf("an identity attribute: got %v, want no problem", err)
	}
}

// TestTraceNoopProvider: a provider that records nothing (otel's no-op)
// leaves the request as it is.
func TestTraceNoopProvider(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")},
		withServer(func(o *extproc.Options) { o.TracerProvider = noop.NewTracerProvider() }))
	resp := r.envoy.Do(t.Context(), tracedChat("a", [2]string{"traceparent", clientParent}),
		sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
	wantStatus(t, resp, 200)
	r.envoy.Wait()
	if got := r.used(t, "tenant-tokens", tenantA); got != 224 {
		t.Errorf("tokens used: got %d, want 224", got)
	}
}

// TestTraceLongModel: a model name of any length admitted (up to
// MaxAttributeBytes) costs a span at most MaxModelBytes.
func TestTraceLongModel(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1<<40, "tenant")}, withRecorder(sr))
	model := "gpt-4o-" + strings.Repeat("é", (extproc.MaxAttributeBytes-len("gpt-4o-"))/2)
	body := []byte(`{"model":"` + model + `","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 200)
	r.envoy.Wait()
	got := spans(t, sr)
	for _, name := range []string{extproc.SpanDecision, extproc.SpanSettlement} {
		s := got[name]
		if s == nil {
			t.Fatalf("no %s span", name)
		}
		v, _ := attr(s, extproc.AttrModel)
		m := v.AsString()
		if len(m) > extproc.MaxModelBytes+len("…") || !utf8.ValidString(m) || !strings.HasPrefix(model, strings.TrimSuffix(m, "…")) {
			t.Errorf("%s: model attribute of %d bytes (valid UTF-8 %v), want the name cut to at most %d bytes",
				name, len(m), utf8.ValidString(m), extproc.MaxModelBytes)
		}
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
