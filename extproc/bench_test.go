package extproc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// BenchmarkLifecycle runs whole requests — headers, buffered body,
// response headers, a streamed response — through the test Envoy, against
// tokenwarden and against a server that does nothing. Their ratio is
// tokenwarden's own cost on top of the ext_proc exchange Envoy makes
// anyway.
func BenchmarkLifecycle(b *testing.B) {
	body := fixture(b, "openai/chat_request.json")
	stream := fixture(b, "openai/chat_stream_usage.sse")
	var chunks [][]byte
	for _, ev := range strings.SplitAfter(string(stream), "\n\n") {
		if ev != "" {
			chunks = append(chunks, []byte(ev))
		}
	}
	upstream := func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "text/event-stream"}}, Chunks: chunks}
	}
	req := chatRequest("a", body)
	limits := []accounting.Limit{
		tokensLimit("tenant-tokens", 1<<50, "tenant"),
		{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: 60e9},
		{Name: "tenant-spend", Dimension: accounting.Cost, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: 86400e9},
	}
	servers := []struct {
		name  string
		envoy func(b *testing.B) *envoytest.Envoy
	}{
		{"noop", func(b *testing.B) *envoytest.Envoy {
			return envoytest.Start(b, envoytest.Noop{}, extproc.GRPCServerOptions()...)
		}},
		{"tokenwarden", func(b *testing.B) *envoytest.Envoy {
			return benchRig(b, limits).envoy
		}},
	}
	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			e := s.envoy(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				resp := e.Do(ctx, req, upstream)
				if resp.Status != 200 {
					b.Fatalf("status %d: %s %v", resp.Status, resp.Body, resp.Err)
				}
			}
		})
	}
}

// benchRig is newRig for benchmarks.
func benchRig(b *testing.B, limits []accounting.Limit) *rig {
	b.Helper()
	lim, err := accounting.New(accounting.Options{Store: memStore(), Limits: limits,
		Prices: accounting.Prices{"default": {Input: 1, Output: 2}}})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := extproc.NewServer(extproc.Options{Limiter: lim, Identity: tenantIdentity, InjectOutputCap: true, InjectStreamUsage: true})
	if err != nil {
		b.Fatal(err)
	}
	return &rig{envoy: envoytest.Start(b, srv, extproc.GRPCServerOptions()...), limiter: lim}
}

// BenchmarkEstimate measures reading a chat body: validation, the walk
// over messages and the approximate token count.
func BenchmarkEstimate(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		body := chatBody(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			counter, err := tokenizer.New(tokenizer.Config{})
			if err != nil {
				b.Fatal(err)
			}
			opts := llm.ParseOptions{Counter: counter, DefaultOutputCap: 4096}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := (openai.Chat{}).ParseRequest("/v1/chat/completions", body, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// chatBody builds a chat request of about size bytes from many turns.
func chatBody(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You answer questions about telecom specifications."}`)
	turn := `,{"role":"user","content":"What does the AMF do when a UE registers, and which messages does it exchange with the AUSF and the UDM along the way?"}`
	for sb.Len() < size-64 {
		sb.WriteString(turn)
	}
	sb.WriteString(`],"max_tokens":512}`)
	return []byte(sb.String())
}
