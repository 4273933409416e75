package openai

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// These tests point the official OpenAI Go SDK at a server that replays
// fixtures and tokenwarden's own replies, to check that a client nobody
// here wrote reads them as the real API's.

// newClient returns an SDK client of rec that retries up to retries times.
func newClient(rec *llmtest.Recorder, retries int) oai.Client {
	return oai.NewClient(option.WithBaseURL(rec.URL()+"/v1"), option.WithAPIKey("sk-test"),
		option.WithMaxRetries(retries))
}

func rateLimited() llm.Error {
	return llm.Error{Kind: llm.RateLimited, Dimension: "tokens", Code: "rate_limit_exceeded", Message: llmtest.LimitMessage}
}

func TestSDKReadsChatStream(t *testing.T) {
	body := fixtures.Read(t, "chat_include_usage.sse")
	client := newClient(llmtest.NewRecorder(t, llmtest.Replay(body, "text/event-stream")), 0)
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
	want := llmtest.ReadUsage(t, Chat{}, "text/event-stream", body)
	if acc.Usage.PromptTokens != want.InputTokens || acc.Usage.CompletionTokens != want.OutputTokens {
		t.Errorf("SDK usage %d in / %d out, ours %d / %d", acc.Usage.PromptTokens, acc.Usage.CompletionTokens, want.InputTokens, want.OutputTokens)
	}
}

func TestSDKReadsResponsesStream(t *testing.T) {
	body := fixtures.Read(t, "responses_incomplete.sse")
	client := newClient(llmtest.NewRecorder(t, llmtest.Replay(body, "text/event-stream")), 0)
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
	want := llmtest.ReadUsage(t, Responses{}, "text/event-stream", body)
	if u.InputTokens != want.InputTokens || u.OutputTokens != want.OutputTokens || u.InputTokensDetails.CachedTokens != want.CachedInputTokens {
		t.Errorf("SDK usage %d in (%d cached) / %d out, ours %+v", u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens, want)
	}
}

func TestSDKRateLimitRetriesAfterDelay(t *testing.T) {
	rec := llmtest.NewRecorder(t, llmtest.LimitReply(RenderError(rateLimited()), true))
	client := newClient(rec, 1)
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
	if apiErr.Message != llmtest.LimitMessage || apiErr.Type != "tokens" || apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("got message %q type %q code %q, want ours", apiErr.Message, apiErr.Type, apiErr.Code)
	}
	rec.CheckOneRetry(t)
}

func TestSDKNeverFitsIsNotRetried(t *testing.T) {
	e := rateLimited()
	e.Message = "Request too large for tenant-tpm (tokens): limit 50000, requested 61000; it can never fit"
	rec := llmtest.NewRecorder(t, llmtest.LimitReply(RenderError(e), false))
	client := newClient(rec, 3)
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
	rec.CheckNoRetry(t)
}
