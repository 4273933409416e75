package extproc

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// streamedRequest is a chat completion's request messages as Envoy sends
// them in STREAMED mode: the headers (with content-length when length),
// then the body in chunks of n bytes.
func streamedRequest(body []byte, n int, length bool) []*extprocv3.ProcessingRequest {
	hv := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte("/v1/chat/completions")},
		{Key: "content-type", RawValue: []byte("application/json")}, {Key: "x-tenant-id", RawValue: []byte("t1")},
	}
	if length {
		hv = append(hv, &corev3.HeaderValue{Key: "content-length", RawValue: []byte(strconv.Itoa(len(body)))})
	}
	msgs := []*extprocv3.ProcessingRequest{{
		Request:        &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hv}}},
		ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_STREAMED, ResponseBodyMode: filterv3.ProcessingMode_STREAMED},
	}}
	for len(body) > 0 {
		k := min(n, len(body))
		msgs = append(msgs, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body[:k], EndOfStream: k == len(body)}}})
		body = body[k:]
	}
	return msgs
}

// largeChat is a chat completion body of about size bytes without an
// output cap, so that the server injects one.
func largeChat(size int) []byte {
	head, tail := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`, `"}]}`
	return []byte(head + strings.Repeat("lorem ipsum ", (size-len(head)-len(tail))/12) + tail)
}

// TestStreamedBodyCollectedOnce: a STREAMED body whose content-length
// Envoy passes on is collected into one buffer of that length: the server
// allocates two copies of the body to collect, edit and release it (the
// body, and the edited one), where appending the chunks as they came took
// about six.
func TestStreamedBodyCollectedOnce(t *testing.T) {
	srv := lifecycleServer(t)
	body := largeChat(4 << 20)
	msgs := streamedRequest(body, 64<<10, true)
	var release *extprocv3.ProcessingResponse
	got := bytesPerRun(3, func() {
		st := newStream(srv, context.Background())
		for _, m := range msgs {
			release, _ = st.handle(m)
		}
		st.replied()
		st.finish()
	})
	edited := release.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	if !strings.Contains(string(edited), `"max_tokens":4096`) || len(edited) <= len(body) {
		t.Fatalf("released body of %d bytes, want the %d-byte body with max_tokens injected", len(edited), len(body))
	}
	t.Logf("allocated %.0f bytes for a %d-byte STREAMED body", got, len(body))
	if got > 2.25*float64(len(body)) {
		t.Errorf("got %.0f bytes allocated for a %d-byte body, want two copies and little more", got, len(body))
	}
}

// TestStreamedBodyWithoutLength: a STREAMED body without a
// content-length is charged a principal's share at its headers, and its
// chunks past that are charged as they arrive; one larger than a share
// is refused as it grows past it, and nothing stays charged.
func TestStreamedBodyWithoutLength(t *testing.T) {
	const share = 1 << 20
	for _, tc := range []struct {
		name   string
		size   int
		status int // 0: released to the upstream
	}{
		{"within a share", share / 2, 0},
		{"past a share", 2 * share, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := lifecycleServer(t, func(o *Options) {
				o.RequestBytes = RequestBytes{InFlight: 4 * share, PerPrincipal: share, Principal: []string{"tenant"}}
			})
			st := newStream(srv, context.Background())
			msgs := streamedRequest(largeChat(tc.size), 64<<10, false)
			var resp *extprocv3.ProcessingResponse
			var last bool
			for i, m := range msgs {
				resp, last = st.handle(m)
				if i == 0 && st.bodyCharge != share {
					t.Fatalf("charged %d at the headers, want a share, %d", st.bodyCharge, share)
				}
				if last {
					break
				}
			}
			switch ir := resp.GetImmediateResponse(); {
			case tc.status == 0 && (ir != nil || st.decided == false):
				t.Fatalf("got %v, want the body released", resp)
			case tc.status != 0 && int(ir.GetStatus().GetCode()) != tc.status:
				t.Fatalf("got %v, want %d", resp, tc.status)
			}
			st.replied()
			st.finish()
			if used := srv.bb.budget.Used(); used != 0 {
				t.Errorf("%d bytes charged after the stream ended, want 0", used)
			}
		})
	}
}
