package extproc

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func headersOf(kv ...string) *extprocv3.HttpHeaders {
	h := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		h.Headers = append(h.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return &extprocv3.HttpHeaders{Headers: h}
}

func TestResponseOrigin(t *testing.T) {
	details := func(d string) map[string]*structpb.Struct {
		return map[string]*structpb.Struct{attributesKey: {Fields: map[string]*structpb.Value{codeDetailsAttribute: structpb.NewStringValue(d)}}}
	}
	tests := []struct {
		name   string
		status int
		h      *extprocv3.HttpHeaders
		attrs  map[string]*structpb.Struct
		want   origin
	}{
		{"upstream, by its header", 503, headersOf(upstreamServiceTime, "2"), nil, fromUpstream},
		{"Envoy's, no header", 504, headersOf("content-type", "text/plain"), nil, envoyAfterSend},
		{"a 2xx is the upstream's even without the header", 200, headersOf(), nil, fromUpstream},
		{"attribute: upstream", 503, headersOf(), details("via_upstream"), fromUpstream},
		{"attribute: timeout", 504, headersOf(upstreamServiceTime, "2"), details("response_timeout"), envoyAfterSend},
		{"attribute: reset after sending", 503, headersOf(), details("upstream_reset_before_response_started{connection_termination}"), envoyAfterSend},
		{"attribute: never connected", 503, headersOf(), details("upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}"), envoyNeverSent},
		{"attribute: pool overflow", 503, headersOf(), details("upstream_reset_before_response_started{overflow}"), envoyNeverSent},
		{"attribute: too large", 413, headersOf(), details("request_payload_too_large"), envoyNeverSent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := responseOrigin(tt.status, tt.h, tt.attrs); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestEnvoys413ReachesTheClient: a body over Envoy's buffer limit gets
// Envoy's 413 after the request headers and before any body; it must
// reach the client, not be replaced by the refusal of an undecided
// request.
func TestEnvoys413ReachesTheClient(t *testing.T) {
	st := newStream(newFuzzServer(t), context.Background())
	h := headersOf(":method", "POST", ":path", "/v1/chat/completions", "x-tenant-id", "t")
	if _, last := st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: h}}); last {
		t.Fatal("request headers refused")
	}
	resp, last := st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: headersOf(":status", "413", "content-type", "text/plain")}})
	if last || resp.GetResponseHeaders() == nil {
		t.Fatalf("got %v, want Envoy's 413 passed on", resp)
	}
	// An upstream's 200 for the same undecided request is refused.
	st = newStream(newFuzzServer(t), context.Background())
	st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: h}})
	resp, last = st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: headersOf(":status", "200", upstreamServiceTime, "1")}})
	if !last || resp.GetImmediateResponse() == nil {
		t.Fatalf("got %v, want the upstream's answer to an unreserved request refused", resp)
	}
}
