package anthropic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// These tests point the official Anthropic Go SDK at a server that
// replays fixtures and tokenwarden's own replies.

type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	times []time.Time
}

func newRecorder(t *testing.T, reply http.HandlerFunc) *recorder {
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

func (rec *recorder) client(retries int) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(rec.srv.URL), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(retries))
}

func params() sdk.MessageNewParams {
	return sdk.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))},
	}
}

// tokenwardenReply serves what extproc sends for a tripped limit.
func tokenwardenReply(reply llm.Reply, retry bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("content-type", "application/json")
		h.Set("x-ratelimit-limit-tokens", "50000")
		h.Set("x-ratelimit-remaining-tokens", "0")
		h.Set("x-ratelimit-reset-tokens", "1.5s")
		h.Set("x-tokenwarden-limit", "tenant-tpm")
		if retry {
			h.Set("retry-after", "2")
			h.Set("retry-after-ms", "150")
		} else {
			h.Set("x-should-retry", "false")
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(reply.Body)
	}
}

const limitMessage = "Rate limit reached for tenant-tpm (tokens): limit 50000, requested 61000; retry in 2s"

func TestSDKReadsStream(t *testing.T) {
	for _, file := range []string{"messages_stream.sse", "messages_stream_tool_crlf.sse"} {
		t.Run(file, func(t *testing.T) {
			body := readFixture(t, file)
			rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("content-type", "text/event-stream")
				_, _ = w.Write(body)
			})
			client := rec.client(0)
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
			r := Messages{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", readerOpts())
			r.Write(body)
			ours, _ := r.Usage()
			su := msg.Usage
			sdkInput := su.InputTokens + su.CacheCreationInputTokens + su.CacheReadInputTokens
			if sdkInput != ours.InputTokens || su.OutputTokens != ours.OutputTokens || su.CacheReadInputTokens != ours.CachedInputTokens {
				t.Errorf("SDK usage %+v, ours %+v", su, ours)
			}
		})
	}
}

func TestSDKRateLimitRetriesAfterDelay(t *testing.T) {
	reply := RenderError(llm.Error{Kind: llm.RateLimited, Dimension: "tokens", Code: "rate_limit_exceeded", Message: limitMessage})
	rec := newRecorder(t, tokenwardenReply(reply, true))
	client := rec.client(1)
	_, err := client.Messages.New(t.Context(), params())
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got error %v, want *anthropic.Error", err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type() != "rate_limit_error" || apiErr.Message != limitMessage {
		t.Errorf("got status %d type %q message %q, want 429 rate_limit_error and ours", apiErr.StatusCode, apiErr.Type(), apiErr.Message)
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
	reply := RenderError(llm.Error{Kind: llm.RateLimited, Dimension: "tokens", Message: "Request too large for tenant-tpm: it can never fit"})
	rec := newRecorder(t, tokenwardenReply(reply, false))
	client := rec.client(3)
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
	if n := len(rec.attempts()); n != 1 {
		t.Errorf("got %d attempts, want 1: x-should-retry: false must stop retries", n)
	}
}
