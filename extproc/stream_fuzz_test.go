package extproc

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// fuzzPaths are the paths a fuzzed request picks from besides the
// fuzzer's own: every API, spelt plainly and in the ways a client could
// try to disguise it.
var fuzzPaths = []string{
	"/v1/chat/completions",
	"/v1/chat%2Fcompletions",
	"//v1/./chat/completions/?x=1",
	"/v1/completions",
	"/v1/embeddings",
	"/v1/responses",
	"/v1/messages",
	"/v1/messages%2F",
	"/v1beta/models/gemini-2.0-flash:generateContent",
	"/v1beta/models/gemini-2.0-flash%3AstreamGenerateContent?alt=sse",
	"/model/amazon.nova-lite-v1%3A0/converse-stream",
	"/openai/deployments/d/chat/completions?api-version=1",
	"/v1/models",
	"/healthz",
}

// fuzzBodies are request bodies the fuzzed request picks from besides
// the fuzzer's own.
var fuzzBodies = []string{
	`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-4o-mini","max_tokens":90000,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"o3","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
	`{"contents":[{"parts":[{"text":"hi"}]}]}`,
	`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`,
	`{"model":"gpt-4o-mini","input":"hi","background":true}`,
	`not json`,
}

// isLLMPath is the fuzzer's own oracle for which paths must be metered,
// written independently of classify: decode every escape, drop the
// query, and look at how the path ends.
func isLLMPath(raw string) bool {
	p := raw
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			b.WriteByte(unhexFuzz(p[i+1])<<4 | unhexFuzz(p[i+2]))
			i += 2
			continue
		}
		b.WriteByte(p[i])
	}
	p = strings.TrimRight(b.String(), "/")
	for _, suffix := range []string{"/chat/completions", "/completions", "/embeddings", "/responses", "/v1/messages",
		":generateContent", ":streamGenerateContent"} {
		if strings.HasSuffix(p, suffix) {
			return true
		}
	}
	// Bedrock serves Converse at /model/{id}/converse only.
	return (strings.HasSuffix(p, "/converse") || strings.HasSuffix(p, "/converse-stream")) && strings.Contains(p, "/model/")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhexFuzz(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func newFuzzServer(t testing.TB) *Server {
	lim, err := accounting.New(accounting.Options{
		Store: memstore.New(memstore.Options{}),
		Limits: []accounting.Limit{
			{Name: "tokens", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 60000, Window: time.Hour},
			{Name: "requests", Dimension: accounting.Requests, Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 40, Window: time.Hour},
		},
		Prices: accounting.Prices{"default": {Input: 1, Output: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Options{
		Limiter:           lim,
		Identity:          Identity{Attributes: []AttributeSource{{Name: "tenant", Header: "x-tenant-id"}}},
		InjectOutputCap:   true,
		InjectStreamUsage: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzStreamInvariant drives one ext_proc stream with a random sequence
// of messages — any order, any end_of_stream flags, trailers, any body
// mode Envoy might announce, any path and body — and checks, after every
// reply, what Envoy would do with it:
//
//   - no request byte goes on to the upstream, and no upstream response
//     reaches the client, for a metered request without a reservation
//     (Envoy's own error reply, a 413 say, may);
//   - every request with a body on an LLM API path (by an oracle written
//     apart from the server's router) is metered;
//   - an admitted request is settled exactly once when the stream ends;
//   - nothing panics.
//
// Its seeds run in every test run; run it for longer with
// go test -run XXX -fuzz FuzzStreamInvariant ./extproc/
func FuzzStreamInvariant(f *testing.F) {
	seeds := [][]byte{
		{0, 0, 0, 1, 1, 5, 3},             // headers, whole body, response
		{0, 0, 0, 1, 0, 5, 3},             // buffered body, eos false (trailers skipped)
		{1, 0, 0, 1, 0, 1, 0, 1, 1, 5, 3}, // streamed, three chunks
		{1, 0, 0, 1, 0, 2, 5, 3},          // streamed, trailers
		{0, 0, 0, 5, 3},                   // response before any body
		{3, 0, 0, 1, 1, 5, 3},             // request body mode NONE
		{0, 2},                            // body first: headers skipped
		{2, 0, 0, 1, 0, 1, 1, 5, 3},       // buffered partial
		{0, 0, 1, 1, 1, 5, 3, 4},          // headers eos, then a body
	}
	for i, s := range seeds {
		f.Add(s, fuzzBodies[i%len(fuzzBodies)], fuzzPaths[i%len(fuzzPaths)])
	}
	srv := newFuzzServer(f)
	modes := []filterv3.ProcessingMode_BodySendMode{
		filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_STREAMED,
		filterv3.ProcessingMode_BUFFERED_PARTIAL, filterv3.ProcessingMode_NONE,
		filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
	}
	f.Fuzz(func(t *testing.T, ops []byte, body, path string) {
		if len(ops) == 0 || len(ops) > 64 || len(body) > 1<<16 {
			return
		}
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		st := newStream(srv, context.Background())
		first := &extprocv3.ProtocolConfiguration{RequestBodyMode: modes[int(next())%len(modes)]}
		if b := next(); b < 200 {
			// Otherwise the fuzzer's own path.
			path = fuzzPaths[int(b)%len(fuzzPaths)]
		}
		if b := next(); b%2 == 1 {
			body = fuzzBodies[int(b/2)%len(fuzzBodies)]
		}
		sentHeaders, headersEOS := false, false
		released := false  // request bytes went on to the upstream
		envoysOwn := false // the response is Envoy's own error reply
		for len(ops) > 0 {
			op := next()
			var req *extprocv3.ProcessingRequest
			switch op % 6 {
			case 0: // request headers (a second set is out of order)
				if !sentHeaders {
					headersEOS = op&8 != 0
				}
				h := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
					{Key: ":method", RawValue: []byte("POST")},
					{Key: ":path", RawValue: []byte(path)},
					{Key: "x-tenant-id", RawValue: []byte("t")},
				}}
				req = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
					RequestHeaders: &extprocv3.HttpHeaders{Headers: h, EndOfStream: headersEOS}}}
				sentHeaders = true
			case 1: // request body: a piece of the body
				n := int(next())
				chunk := body
				if op&8 != 0 && n < len(body) {
					chunk, body = body[:n], body[n:]
				} else {
					body = ""
				}
				req = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
					RequestBody: &extprocv3.HttpBody{Body: []byte(chunk), EndOfStream: op&16 != 0}}}
			case 2:
				req = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
					RequestTrailers: &extprocv3.HttpTrailers{}}}
			case 3: // response headers: the upstream's, or Envoy's own error
				status := "200"
				if op&8 != 0 {
					status = "500"
				}
				h := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte(status)},
					{Key: "content-type", RawValue: []byte("text/event-stream")}}}
				if op&32 != 0 {
					h.Headers = append(h.Headers, &corev3.HeaderValue{Key: upstreamServiceTime, RawValue: []byte("1")})
				}
				// An error without the router's header is Envoy's own reply
				// (a 413, a timeout), which may pass an undecided request:
				// it never reached the upstream.
				envoysOwn = status != "200" && op&32 == 0
				req = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
					ResponseHeaders: &extprocv3.HttpHeaders{Headers: h, EndOfStream: op&16 != 0}}}
			case 4:
				req = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
					ResponseBody: &extprocv3.HttpBody{Body: []byte("data: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n"), EndOfStream: op&8 != 0}}}
			case 5:
				req = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
					ResponseTrailers: &extprocv3.HttpTrailers{}}}
			}
			if first != nil {
				req.ProtocolConfig, first = first, nil
			}
			resp, last := st.handle(req)
			if resp == nil {
				t.Fatalf("no reply to %T", req.Request)
			}
			if last {
				if resp.GetImmediateResponse() == nil {
					t.Fatalf("a last reply that is not an immediate response: %v", resp)
				}
				break
			}
			if !st.decided && st.metered {
				switch r := req.Request.(type) {
				case *extprocv3.ProcessingRequest_RequestBody:
					mut := resp.GetRequestBody().GetResponse().GetBodyMutation()
					if len(r.RequestBody.Body) > 0 && !mut.GetClearBody() {
						released = true
					}
					if mut.GetBody() != nil && len(mut.GetBody()) > 0 {
						released = true
					}
				case *extprocv3.ProcessingRequest_ResponseHeaders, *extprocv3.ProcessingRequest_ResponseBody,
					*extprocv3.ProcessingRequest_ResponseTrailers:
					if !envoysOwn {
						t.Fatalf("the upstream's %T for an undecided metered request was let through", req.Request)
					}
				case *extprocv3.ProcessingRequest_RequestTrailers:
					t.Fatalf("%T of an undecided metered request was let through", req.Request)
				}
				if released {
					t.Fatalf("request body bytes went on to the upstream before the reservation (mode %v, path %q)", st.bodyMode, path)
				}
			}
			if st.decided && st.res == nil {
				t.Fatal("decided without a reservation")
			}
			if sentHeaders && st.headersSeen && !headersEOS && st.target.api == nil && st.metered {
				t.Fatal("metered without an API")
			}
		}
		if st.headersSeen && !headersEOS && isLLMPath(st.path) && !st.metered {
			t.Fatalf("path %q with a body is an LLM call but was not metered", st.path)
		}
		st.finish()
		if st.res != nil && !st.res.Settled() {
			t.Fatal("a reservation was not settled when the stream ended")
		}
		if st.res != nil {
			if ok, _ := st.res.Settle(context.Background(), accounting.Usage{}); ok {
				t.Fatal("a reservation settled twice")
			}
		}
	})
}
