package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// These tests point the official Anthropic Go SDK at a server that
// replays fixtures and tokenwarden's own replies.

// newClient returns an SDK client of rec that retries up to retries times.
func newClient(rec *llmtest.Recorder, retries int) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(rec.URL()), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(retries))
}

func params() sdk.MessageNewParams {
	return sdk.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))},
	}
}

func TestSDKReadsStream(t *testing.T) {
	for _, file := range []string{"messages_stream.sse", "messages_stream_tool_crlf.sse"} {
		t.Run(file, func(t *testing.T) {
			body := fixtures.Read(t, file)
			client := newClient(llmtest.NewRecorder(t, llmtest.Replay(body, "text/event-stream")), 0)
			stream := client.Messages.NewStreaming(t.Context(), params())
			var msg sdk.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatalf("accumulate: %v", err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("SDK stream error: %v", err)
			}
			ours := llmtest.ReadUsage(t, Messages{}, "text/event-stream", body)
			su := msg.Usage
			sdkInput := su.InputTokens + su.CacheCreationInputTokens + su.CacheReadInputTokens
			if sdkInput != ours.InputTokens || su.OutputTokens != ours.OutputTokens || su.CacheReadInputTokens != ours.CachedInputTokens {
				t.Errorf("SDK usage %+v, ours %+v", su, ours)
			}
		})
	}
}

func TestSDKRateLimitRetriesAfterDelay(t *testing.T) {
	reply := RenderError(llm.Error{Kind: llm.RateLimited, Dimension: "tokens", Code: "rate_limit_exceeded", Message: llmtest.LimitMessage})
	rec := llmtest.NewRecorder(t, llmtest.LimitReply(reply, true))
	client := newClient(rec, 1)
	_, err := client.Messages.New(t.Context(), params())
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got error %v, want *anthropic.Error", err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type() != "rate_limit_error" || apiErr.Message != llmtest.LimitMessage {
		t.Errorf("got status %d type %q message %q, want 429 rate_limit_error and ours", apiErr.StatusCode, apiErr.Type(), apiErr.Message)
	}
	rec.CheckOneRetry(t)
}

func TestSDKNeverFitsIsNotRetried(t *testing.T) {
	reply := RenderError(llm.Error{Kind: llm.RateLimited, Dimension: "tokens", Message: "Request too large for tenant-tpm: it can never fit"})
	rec := llmtest.NewRecorder(t, llmtest.LimitReply(reply, false))
	client := newClient(rec, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := client.Messages.New(ctx, params())
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("got error %v, want a 429 *anthropic.Error", err)
	}
	if !strings.Contains(apiErr.Message, "never fit") {
		t.Errorf("got message %q, want ours", apiErr.Message)
	}
	rec.CheckNoRetry(t)
}
