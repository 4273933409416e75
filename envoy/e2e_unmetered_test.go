package envoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// e2eWebSocketUpgrades lets the rig's listener forward WebSocket
// upgrades, as an Envoy serving the Realtime API must: the shipped
// envoy.yaml enables none, and Envoy answers an upgrade 403 itself.
func e2eWebSocketUpgrades(t *testing.T) func(doc map[string]any) {
	return func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config").(map[string]any)
		hcm["upgrade_configs"] = []any{map[string]any{"upgrade_type": "websocket"}}
	}
}

// TestE2EUnmeteredFamilyRefused: calls of provider APIs tokenwarden
// cannot meter are refused by the real Envoy's filter with a 403 in the
// provider's own shape, before any upstream: an OpenAI batch made with
// the official SDK, a Gemini batch, a Bedrock asynchronous invocation and
// the Realtime API's WebSocket upgrade. Before, each was forwarded to
// the upstream as a request of api "other". (The rig's listener forwards
// WebSocket upgrades; see e2eWebSocketUpgrades.)
func TestE2EUnmeteredFamilyRefused(t *testing.T) {
	r := e2e(t)
	t.Parallel()
	c := newE2ECaller(t)

	t.Run("OpenAI batch, official SDK", func(t *testing.T) {
		client := openai.NewClient(option.WithBaseURL("http://"+r.listen+"/v1/"), option.WithAPIKey(c.token), option.WithMaxRetries(2))
		_, err := client.Batches.New(t.Context(), openai.BatchNewParams{
			InputFileID: "file-abc123", Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("got %v, want an *openai.Error", err)
		}
		if apiErr.StatusCode != http.StatusForbidden || apiErr.Code != "unmetered_api_refused" {
			t.Errorf("got status %d, code %q (%s), want 403 unmetered_api_refused", apiErr.StatusCode, apiErr.Code, apiErr.Message)
		}
	})

	for _, tc := range []struct {
		name, method, path string
		headers            []string
		wantBody           func(map[string]any) bool
		wantHeader         [2]string
	}{
		{name: "Gemini batch", method: "POST", path: "/v1beta/models/gemini-2.5-flash:batchGenerateContent",
			wantBody: func(b map[string]any) bool {
				e, _ := b["error"].(map[string]any)
				return e["status"] == "PERMISSION_DENIED" && e["code"] == float64(403)
			}},
		{name: "Bedrock asynchronous invocation", method: "POST", path: "/async-invoke",
			wantBody: func(b map[string]any) bool { return b["message"] != nil }, wantHeader: [2]string{"x-amzn-errortype", "AccessDeniedException"}},
		{name: "Realtime WebSocket upgrade", method: "GET", path: "/v1/realtime?model=gpt-realtime",
			headers: []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
			wantBody: func(b map[string]any) bool {
				e, _ := b["error"].(map[string]any)
				return e["code"] == "unmetered_api_refused"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.method == "POST" {
				body = bytes.NewReader([]byte(`{"batch":{"input_config":{"requests":{"requests":[]}}}}`))
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.method, "http://"+r.listen+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+c.token)
			for i := 0; i < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var got map[string]any
			if resp.StatusCode != http.StatusForbidden || json.Unmarshal(b, &got) != nil || !tc.wantBody(got) {
				t.Fatalf("got %d %s, want tokenwarden's 403 in the provider's shape", resp.StatusCode, b)
			}
			if h := tc.wantHeader; h[0] != "" && resp.Header.Get(h[0]) != h[1] {
				t.Errorf("%s: got %q, want %q", h[0], resp.Header.Get(h[0]), h[1])
			}
		})
	}
}
