package extproc_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	openai "github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// sdkDeadline bounds an SDK call in TestSDKsOnRetryHints. Every wait a
// case names is longer, so a call that ends in it was waiting; one that
// gives up returns a 429 at once, and one that retried on its own
// backoff (half a second, then a second) has made more than one attempt
// by then.
const sdkDeadline = 2 * time.Second

// sdkOutcome is how an SDK call against a 429 ended.
type sdkOutcome string

const (
	// sdkWaiting: one attempt, and the call was still waiting to retry
	// when its context's deadline passed.
	sdkWaiting sdkOutcome = "waiting"
	// sdkGaveUp: one attempt, and the 429 returned at once.
	sdkGaveUp sdkOutcome = "gave up"
)

// TestSDKsOnRetryHints drives the SDKs in go.mod, with their default
// retries, against tokenwarden's own 429 for a limit that frees in 5 s,
// 61 s, 121 s and a day, through the server and the test Envoy: the
// attempts they make and whether they wait or give up is what
// DefaultShouldRetryMax (two minutes) and the README's table rest on.
// openai-go waits up to two minutes and gives up beyond; anthropic-sdk-go
// waits whatever retry-after says, so it is x-should-retry: false that
// keeps it from waiting a day. At the old default of a minute, a
// per-minute window's first refusal (61 s) sent openai-go away.
func TestSDKsOnRetryHints(t *testing.T) {
	const (
		day = 24 * time.Hour
		off = -1 // should_retry_max: off
	)
	tests := []struct {
		sdk     string
		freesIn time.Duration
		max     time.Duration // Options.ShouldRetryMax; 0 is the default
		want    sdkOutcome
	}{
		{"openai", 5 * time.Second, 0, sdkWaiting},
		{"openai", 61 * time.Second, 0, sdkWaiting},
		{"openai", 121 * time.Second, 0, sdkGaveUp},
		{"openai", day, 0, sdkGaveUp},
		{"anthropic", 5 * time.Second, 0, sdkWaiting},
		{"anthropic", 61 * time.Second, 0, sdkWaiting},
		{"anthropic", 121 * time.Second, 0, sdkGaveUp},
		{"anthropic", day, 0, sdkGaveUp},
		// Without x-should-retry: false, what the SDKs do on their own.
		{"openai", 121 * time.Second, off, sdkGaveUp},
		{"openai", day, off, sdkGaveUp},
		{"anthropic", 121 * time.Second, off, sdkWaiting},
		{"anthropic", day, off, sdkWaiting},
		// The old default.
		{"openai", 61 * time.Second, time.Minute, sdkGaveUp},
	}
	for _, tt := range tests {
		name := tt.sdk + " " + tt.freesIn.String()
		switch tt.max {
		case off:
			name += " should_retry_max off"
		case 0:
		default:
			name += " should_retry_max " + tt.max.String()
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url, attempts := serveRefusing(t, tt.freesIn, tt.max)
			ctx, cancel := context.WithTimeout(t.Context(), sdkDeadline)
			defer cancel()
			var err error
			var status int
			switch tt.sdk {
			case "openai":
				c := openai.NewClient(openaioption.WithBaseURL(url+"/v1"), openaioption.WithAPIKey("sk-test"),
					openaioption.WithHeader("x-tenant-id", "t"))
				_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
				var apiErr *openai.Error
				if errors.As(err, &apiErr) {
					status = apiErr.StatusCode
				}
			case "anthropic":
				c := anthropic.NewClient(anthropicoption.WithBaseURL(url), anthropicoption.WithAPIKey("sk-ant-test"),
					anthropicoption.WithHeader("x-tenant-id", "t"))
				_, err = c.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
				var apiErr *anthropic.Error
				if errors.As(err, &apiErr) {
					status = apiErr.StatusCode
				}
			}
			var got sdkOutcome
			switch {
			case status == http.StatusTooManyRequests:
				got = sdkGaveUp
			case errors.Is(err, context.DeadlineExceeded):
				got = sdkWaiting
			default:
				t.Fatalf("the call ended in %v, want tokenwarden's 429 or the deadline", err)
			}
			if n := attempts.Load(); got != tt.want || n != 1 {
				t.Errorf("got %d attempts and %s (%v), want one attempt and %s", n, got, err, tt.want)
			}
		})
	}
}

// serveRefusing serves HTTP through a tokenwarden whose one limit, a
// request per window of freesIn, is spent, with the store's clock at the
// start of a window: every request gets the 429 of a limit that frees in
// exactly freesIn. It returns the server's URL and a count of the
// requests it got.
func serveRefusing(t *testing.T, freesIn, maxWait time.Duration) (string, *atomic.Int64) {
	t.Helper()
	w := freesIn.Microseconds()
	at := time.UnixMicro(1_790_000_000_000_000 / w * w)
	lim := accounting.Limit{Name: "tenant-window", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Algorithm: accounting.FixedWindow, Limit: 1, Window: freesIn}
	r := newRig(t, []accounting.Limit{lim}, withServer(func(o *extproc.Options) { o.ShouldRetryMax = maxWait }),
		withStore(memstore.New(memstore.Options{Now: func() time.Time { return at }})))
	ok := jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("t", []byte(`{"model":"gpt-4o-mini","messages":[]}`)), ok), 200)
	attempts := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		attempts.Add(1)
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		var headers [][2]string
		for k, vs := range req.Header {
			for _, v := range vs {
				headers = append(headers, [2]string{strings.ToLower(k), v})
			}
		}
		resp := r.envoy.Do(req.Context(), envoytest.Request{Path: req.URL.RequestURI(), Headers: headers, Body: body}, ok)
		for k, vs := range resp.Header {
			if !strings.HasPrefix(k, ":") {
				rw.Header()[k] = vs
			}
		}
		rw.WriteHeader(resp.Status)
		rw.Write(resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, attempts
}
