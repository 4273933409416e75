package openai

import (
	"bytes"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

func BenchmarkUsage(b *testing.B) {
	const model = "gpt-4o-mini"
	b.Run("chat_stream", func(b *testing.B) {
		llmtest.BenchReader(b, Chat{}, model, "text/event-stream", bytes.Repeat(fixtures.Read(b, "chat_include_usage.sse"), 100))
	})
	b.Run("responses_stream", func(b *testing.B) {
		llmtest.BenchReader(b, Responses{}, model, "text/event-stream", bytes.Repeat(fixtures.Read(b, "responses_keepalive.sse"), 100))
	})
	b.Run("chat_json", func(b *testing.B) {
		llmtest.BenchReader(b, Chat{}, model, "application/json", fixtures.Read(b, "chat_cached.json"))
	})
	b.Run("embeddings_json", func(b *testing.B) {
		llmtest.BenchReader(b, Embeddings{}, model, "application/json", fixtures.Read(b, "embeddings.json"))
	})
}

// TestStreamAllocsPerEvent: the stream readers allocate nothing per event
// once they are set up.
func TestStreamAllocsPerEvent(t *testing.T) {
	r := Chat{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", llmtest.ReaderOptions())
	llmtest.CheckNoAllocs(t, "chat", r, fixtures.Read(t, "chat_azure_content_filter.sse"))
	r = Responses{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", llmtest.ReaderOptions())
	llmtest.CheckNoAllocs(t, "responses", r, fixtures.Read(t, "responses_keepalive.sse"))
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	text := llmtest.LongPrompt()
	for _, tc := range []struct {
		name string
		api  llm.API
		body string
	}{
		{"chat", Chat{}, `{"model":"m","messages":[{"role":"user","content":"` + text + `"}],"max_tokens":5}`},
		{"responses", Responses{}, `{"model":"m","input":"` + text + `","max_output_tokens":50}`},
		{"completions", Completions{}, `{"model":"m","prompt":"` + text + `","max_tokens":5}`},
		{"embeddings", Embeddings{}, `{"model":"m","input":["` + text + `"]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			llmtest.BenchParse(b, tc.api, "/v1/x", []byte(tc.body))
		})
	}
}

// BenchmarkParseChat2KB measures the estimate of the chat request
// loadgen sends (a system prompt and fifteen turns, 2 KB), with the
// server's default counter: the request side of the lifecycle the whole
// servers are compared on. Its instructions per op, counted with
// callgrind, are in BENCHMARKS.md.
func BenchmarkParseChat2KB(b *testing.B) {
	body := fixtures.Read(b, "chat_request_2k.json")
	opts := llm.ParseOptions{Counter: tokenizer.Default(), DefaultOutputCap: 4096}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Chat{}).ParseRequest("/v1/chat/completions", body, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseAllocs: without an explanation, the parse allocates nothing
// per message, item or part.
func TestParseAllocs(t *testing.T) {
	for _, tc := range []struct {
		api  llm.API
		body func(n int) string
	}{
		{Chat{}, func(n int) string {
			return `{"model":"gpt-4o","messages":[` + llmtest.Repeat(`{"role":"user","name":"ann","content":[{"type":"text","text":"hi there"},`+
				`{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]},`+
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, n) +
				`],"tools":[{"type":"function","function":{"name":"f"}}],"functions":[{"name":"g"}]}`
		}},
		{Responses{}, func(n int) string {
			return `{"model":"gpt-4o","instructions":"Be brief.","input":[` + llmtest.Repeat(`{"role":"user","content":[{"type":"input_text","text":"hi"}]},`+
				`{"type":"function_call","name":"f","arguments":"{}"},{"type":"function_call_output","output":"ok"},`+
				`{"type":"reasoning","summary":[]},{"role":"assistant","content":"done"}`, n) +
				`],"tools":[{"type":"function","name":"f"}],"text":{"format":{"type":"json_schema"}}}`
		}},
		{Completions{}, func(n int) string {
			return `{"model":"gpt-3.5-turbo-instruct","prompt":[` + llmtest.Repeat(`"Say this"`, n) + `],"suffix":"end"}`
		}},
		{Embeddings{}, func(n int) string {
			return `{"model":"text-embedding-3-small","input":[` + llmtest.Repeat(`[1,2,3]`, n) + `]}`
		}},
	} {
		llmtest.CheckParseAllocs(t, tc.api, "/v1/x", func(n int) []byte { return []byte(tc.body(n)) })
	}
}

// BenchmarkLifecycleEvents measures the response side of the lifecycle
// that extproc's BenchmarkProcess replays: the seven events of
// chat_stream_usage.sse (role, three text deltas, finish reason, usage,
// [DONE]), one Write each as Envoy hands them over, read by a new chat
// stream reader with the default token counter, as the server reads
// them. Its instructions per op, counted with callgrind, are the SSE
// path's share of a lifecycle (see BENCHMARKS.md).
func BenchmarkLifecycleEvents(b *testing.B) {
	var events [][]byte
	for ev := range bytes.SplitAfterSeq(fixtures.Read(b, "chat_stream_usage.sse"), []byte("\n\n")) {
		if len(ev) > 0 {
			events = append(events, ev)
		}
	}
	if len(events) != 7 {
		b.Fatalf("got %d events, want 7", len(events))
	}
	req := &llm.Request{Model: "gpt-4o-mini"}
	b.ReportAllocs()
	for b.Loop() {
		r := Chat{}.NewUsageReader(req, "text/event-stream", llm.ReaderOptions{})
		for _, ev := range events {
			r.Write(ev)
		}
		if u, ok := r.Usage(); !ok || u.OutputTokens != 12 {
			b.Fatalf("got usage %+v %v, want 12 output tokens", u, ok)
		}
	}
}
