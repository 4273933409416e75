package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// These tests point the official OpenAI Go SDK at a server that replays
// fixtures and tokenwarden's own replies, to check that a client nobody
// here wrote reads them as the real API's.

// recorder is an httptest server that answers every request with reply
// and records when each attempt arrived.
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	times []time.Time
}

func newRecorder(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.times = append(rec.times, time.Now())
		rec.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) attempts() []time.Time {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]time.Time(nil), rec.times...)
}

func (rec *recorder) client(retries int) oai.Client {
	return oai.NewClient(option.WithBaseURL(rec.srv.URL+"/v1"), option.WithAPIKey("sk-test"),
		option.WithMaxRetries(retries))
}

// replay serves a fixture with the given content type.
func replay(body []byte, contentType string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", contentType)
		_, _ = w.Write(body)
	}
}

// tokenwardenReply serves what extproc sends for a tripped limit: the
// rendered body and the rate-limit headers.
func tokenwardenReply(reply llm.Reply, retry bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("content-type", "application/json")
		for _, kv := range reply.Headers {
			h.Set(kv[0], kv[1])
		}
		h.Set("x-ratelimit-limit-tokens", "50000")
		h.Set("x-ratelimit-remaining-tokens", "0")
		h.Set("x-ratelimit-reset-tokens", "1.5s")
		h.Set("x-tokenwarden-limit", "tenant-tpm")
		if retry {
			h.Set("retry-after", "2")
			// Small, so the test is quick; the SDK prefers it to retry-after.
			h.Set("retry-after-ms", "150")
		} else {
			h.Set("x-should-retry", "false")
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(reply.Body)
	}
}

const limitMessage = "Rate limit reached for tenant-tpm (tokens): limit 50000, requested 61000; retry in 2s"

func rateLimited() llm.Error {
	return llm.Error{Kind: llm.RateLimited, Dimension: "tokens", Code: "rate_limit_exceeded", Message: limitMessage}
}

// ourUsage runs the package's reader over a fixture.
func ourUsage(t *testing.T, api llm.API, body []byte, contentType string) accounting.Usage {
	t.Helper()
	r := api.NewUsageReader(&llm.Request{Model: "m"}, contentType, readerOpts())
	r.Write(body)
	u, ok := r.Usage()
	if !ok {
		t.Fatal("our reader found no usage")
	}
	return u
}

func TestSDKReadsChatStream(t *testing.T) {
	body := readFixture(t, "chat_include_usage.sse")
	rec := newRecorder(t, replay(body, "text/event-stream"))
	client := rec.client(0)
	stream := client.Chat.Completions.NewStreaming(t.Context(), oai.ChatCompletionNewParams{
		Model:         "gpt-4o-mini",
		Messages:      []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	})
	var acc oai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("SDK stream error: %v", err)
	}
	if chunks != 22 {
		t.Errorf("SDK read %d chunks, want 22", chunks)
	}
	want := ourUsage(t, Chat{}, body, "text/event-stream")
	if acc.Usage.PromptTokens != want.InputTokens || acc.Usage.CompletionTokens != want.OutputTokens {
		t.Errorf("SDK usage %d in / %d out, ours %d / %d", acc.Usage.PromptTokens, acc.Usage.CompletionTokens, want.InputTokens, want.OutputTokens)
	}
}

func TestSDKReadsResponsesStream(t *testing.T) {
	body := readFixture(t, "responses_incomplete.sse")
	rec := newRecorder(t, replay(body, "text/event-stream"))
	client := rec.client(0)
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "gpt-4.1-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")},
	})
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		last = stream.Current()
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("SDK stream error: %v", err)
	}
	if last.Type != "response.incomplete" {
		t.Fatalf("SDK's last event is %q, want response.incomplete", last.Type)
	}
	u := last.Response.Usage
	want := ourUsage(t, Responses{}, body, "text/event-stream")
	if u.InputTokens != want.InputTokens || u.OutputTokens != want.OutputTokens || u.InputTokensDetails.CachedTokens != want.CachedInputTokens {
		t.Errorf("SDK usage %d in (%d cached) / %d out, ours %+v", u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens, want)
	}
}

func TestSDKRateLimitRetriesAfterDelay(t *testing.T) {
	rec := newRecorder(t, tokenwardenReply(RenderError(rateLimited()), true))
	client := rec.client(1)
	_, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
	})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got error %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("got status %d, want 429", apiErr.StatusCode)
	}
	if apiErr.Message != limitMessage || apiErr.Type != "tokens" || apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("got message %q type %q code %q, want ours", apiErr.Message, apiErr.Type, apiErr.Code)
	}
	at := rec.attempts()
	if len(at) != 2 {
		t.Fatalf("got %d attempts, want 2 (one retry)", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < 150*time.Millisecond {
		t.Errorf("SDK retried after %v, want at least retry-after-ms 150ms", gap)
	}
}

func TestSDKNeverFitsIsNotRetried(t *testing.T) {
	e := rateLimited()
	e.Message = "Request too large for tenant-tpm (tokens): limit 50000, requested 61000; it can never fit"
	rec := newRecorder(t, tokenwardenReply(RenderError(e), false))
	client := rec.client(3)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
	})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("got error %v, want a 429 *openai.Error", err)
	}
	if !strings.Contains(apiErr.Message, "never fit") {
		t.Errorf("got message %q, want ours", apiErr.Message)
	}
	if n := len(rec.attempts()); n != 1 {
		t.Errorf("got %d attempts, want 1: x-should-retry: false must stop retries", n)
	}
}
