package extproc_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/trace"
	"google.golang.org/grpc"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestLentBuffersConcurrently: streams at once through gRPC, their
// replies written into buffers lent from one pool (see lend.go), with
// bodies around each of the pool's sizes, the release's switch from
// wire form to messages (8 KiB) and the largest buffer lent (16 KiB),
// buffered and streamed. Each upstream must get its own body with
// exactly its two edits, and each client its own metadata.
func TestLentBuffersConcurrently(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1<<40, "tenant")})
			if streamed {
				r.envoy.Filter.RequestBody = envoytest.Streamed
			}
			sizes := []int{10, 400, 500, 900, 1000, 1900, 2000, 3900, 4000, 8000, 8100, 8200, 16000, 16150, 16256, 16300, 17000}
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := range 2 * len(sizes) {
						lentRoundTrip(t, r, streamed, w, i, sizes[(i+w)%len(sizes)])
					}
				})
			}
			wg.Wait()
		})
	}
}

// lentRoundTrip sends worker w's i-th request, whose content is n
// bytes, and checks what the upstream and the client got.
func lentRoundTrip(t *testing.T, r *rig, streamed bool, w, i, n int) {
	stream := (i+w)%2 == 0
	model := fmt.Sprintf("m-%d-%d", w, i)
	body := fmt.Appendf(nil, `{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`,
		model, stream, strings.Repeat(string(rune('a'+w)), n))
	usage := `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	up := envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
		Chunks: [][]byte{[]byte(usage)}}
	if stream {
		up = envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "text/event-stream"}},
			Chunks: [][]byte{[]byte(`data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n"),
				[]byte("data: " + usage + "\n\ndata: [DONE]\n\n")}}
	}
	req := chatRequest(fmt.Sprintf("t%d", w), body)
	if streamed {
		third := len(body) / 3
		req.Chunks = [][]byte{body[:third], body[third : 2*third], body[2*third:]}
	}
	resp := r.envoy.Do(t.Context(), req, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse { return up })
	if resp.Status != 200 || resp.Upstream == nil {
		t.Errorf("%s: got status %d (%v), want 200 from the upstream", model, resp.Status, resp.Err)
		return
	}
	edits := `,"max_tokens":1000}`
	if stream {
		edits = `,"max_tokens":1000,"stream_options":{"include_usage":true}}`
	}
	want := append(bytes.Clone(body[:len(body)-1]), edits...)
	if got := resp.Upstream.Body; !bytes.Equal(got, want) {
		t.Errorf("%s, %d bytes of content: the upstream got %d bytes ending %q, want %d ending %q",
			model, n, len(got), got[max(0, len(got)-60):], len(want), want[len(want)-60:])
	}
	if cl := resp.Upstream.Header.Get("content-length"); !streamed && cl != fmt.Sprint(len(want)) {
		t.Errorf("%s: got content-length %q, want %d", model, cl, len(want))
	}
	md := resp.Metadata[extproc.MetadataNamespace]
	if md["model"] != model || md["actual_tokens"] != float64(4) {
		t.Errorf("%s: got metadata model %v, actual_tokens %v; want %s, 4", model, md["model"], md["actual_tokens"], model)
	}
}

// TestLentBuffersDowngraded: requests admitted on a fallback model,
// whose body (the downgrade's, swapped in) is then edited into a lent
// buffer, of sizes around every pool size, the 8 KiB switch from wire
// form to messages and the largest lent buffer, from four tenants at
// once, buffered and streamed: each upstream gets its own body with the
// fallback's name and the output cap, byte for byte.
func TestLentBuffersDowngraded(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			r := newRig(t, downgradeLimits())
			if streamed {
				r.envoy.Filter.RequestBody = envoytest.Streamed
			}
			sizes := []int{10, 400, 500, 1900, 4000, 8000, 8050, 8100, 8200, 16100, 16150, 16256, 16300, 17000}
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					tenant := fmt.Sprintf("dg%d", w)
					for i := range 2 * len(sizes) {
						n := sizes[(i+w)%len(sizes)]
						body := fmt.Appendf(nil, `{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":%q}]}`,
							strings.Repeat(string(rune('a'+w)), n))
						req := chatRequest(tenant, body)
						if streamed {
							third := len(body) / 3
							req.Chunks = [][]byte{body[:third], body[third : 2*third], body[2*third:]}
						}
						up := jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
						resp := r.envoy.Do(t.Context(), req, up)
						if resp.Status != 200 || resp.Upstream == nil {
							t.Errorf("%s, request %d: got status %d (%v), want 200 from the upstream", tenant, i, resp.Status, resp.Err)
							continue
						}
						want := bytes.Clone(body)
						if i > 0 { // the first of each tenant is admitted on gpt-4o
							want = bytes.Replace(want, []byte(`"gpt-4o"`), []byte(`"gpt-4o-mini"`), 1)
						}
						want = append(want[:len(want)-1], `,"max_tokens":1000}`...)
						if got := resp.Upstream.Body; !bytes.Equal(got, want) {
							t.Errorf("%s, request %d, %d bytes of content: the upstream got %d bytes ending %q, want %d ending %q", tenant, i, n,
								len(got), got[max(0, len(got)-60):], len(want), want[len(want)-60:])
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestLendOffUnderGRPCTracing: grpc-go's request tracing keeps every
// message sent and formats it when /debug/requests is viewed, long
// after the send; a stream grpc-go traces lends nothing, so the page
// shows the replies that were sent. (With lending, the traced replies
// were later ones' bytes, which did not even parse.) grpc-go decides
// when a stream begins: a stream it traces lends nothing even when
// tracing is switched off before the stream's handler runs (here by an
// interceptor, standing in for another goroutine).
func TestLendOffUnderGRPCTracing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		switchOff bool
	}{
		{"tracing on", false},
		{"switched off once grpc decided to trace", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(on bool) { grpc.EnableTracing = on }(grpc.EnableTracing)
			grpc.EnableTracing = true
			lim, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}),
				Prices: accounting.Prices{"default": {Input: 5, Output: 15}}})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := extproc.NewServer(extproc.Options{Identity: tenantIdentity, Limiter: lim, DefaultOutputCap: 1000,
				InjectOutputCap: true, InjectStreamUsage: true})
			if err != nil {
				t.Fatal(err)
			}
			opts := srv.ServerOptions()
			if tc.switchOff {
				opts = append(opts, grpc.ChainStreamInterceptor(
					func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
						grpc.EnableTracing = false
						return h(s, ss)
					}))
			}
			envoy := envoytest.Start(t, srv, opts...)
			for _, tenant := range []string{"alice", "bob", "carol"} {
				grpc.EnableTracing = true
				body := []byte(`{"messages":[{"role":"user","content":"` + tenant + strings.Repeat("x", 3000) + `"}],"model":"gpt-4o-mini"}`)
				resp := envoy.Do(t.Context(), chatRequest(tenant, body),
					jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)))
				if resp.Status != 200 {
					t.Fatalf("%s: got status %d (%v), want 200", tenant, resp.Status, resp.Err)
				}
			}
			var page bytes.Buffer
			trace.Render(&page, httptest.NewRequest("GET", "/debug/requests?fam=grpc.Recv.envoy.service.ext_proc.v3.ExternalProcessor&b=0&exp=1", nil), true)
			sent := strings.Count(page.String(), "sent: ")
			if sent == 0 {
				t.Fatalf("got no traced replies on the page, want the streams'")
			}
			for _, bad := range []string{"PANIC", "error parsing"} {
				if strings.Contains(page.String(), bad) {
					t.Errorf("the traced replies (%d) show %q: bytes other than those sent", sent, bad)
				}
			}
		})
	}
}
