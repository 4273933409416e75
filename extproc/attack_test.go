package extproc_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// The tests in this file are an adversarial review's findings: each one
// sends what a client (or an operator's plausible config) can send, and
// asserts what the limiter's promise requires. They fail until the
// finding is fixed.

// thinkingStream is an Anthropic stream of a request with extended
// thinking: message_start reports the input and a provisional output of
// 1, then a summarised thinking block streams. Claude 4 models bill the
// full thinking, which the summary understates.
const thinkingStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Summary: considered the options."}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"The answer is 42."}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":1}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15800}}` + "\n\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

// TestThinkingStreamCutAfterMessageStartKeepsTheCap: a request that
// turns thinking on, whose stream is cut before message_delta, must keep
// its whole reservation — the thinking it was billed for never streamed
// in full. Cut before message_start it does (the control); cut after,
// message_start's provisional usage (output_tokens: 1) is taken for a
// usage report, and the request is charged its input and the summary it
// streamed: a client that hangs up once it has the answer (or just
// before message_delta) pays a fraction of the thinking it caused.
func TestThinkingStreamCutAfterMessageStartKeepsTheCap(t *testing.T) {
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":20000,"stream":true,` +
		`"thinking":{"type":"enabled","budget_tokens":16000},"messages":[{"role":"user","content":"Think hard: what is 6 times 7?"}]}`)
	events := strings.SplitAfter(thinkingStream, "\n\n")
	tests := []struct {
		name string
		// cutAfter is the number of SSE events the upstream gets out
		// before the client leaves.
		cutAfter int
	}{
		{"before message_start", 0},
		{"after message_start", 1},
		{"after the answer, before message_delta", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")})
			req := envoytest.Request{Path: "/v1/messages", Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "a"}}, Body: body}
			resp := r.envoy.Do(t.Context(), req, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				var chunks [][]byte
				for _, ev := range events {
					chunks = append(chunks, []byte(ev))
				}
				up := envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "text/event-stream"}}, Chunks: chunks}
				if tt.cutAfter == 0 {
					// The client leaves before the first event: Envoy
					// has the headers, no body.
					up.Chunks = [][]byte{[]byte(": keep-alive\n\n"), []byte(events[0])}
					up.CutAfter = 1
				} else {
					up.CutAfter = tt.cutAfter
				}
				return up
			})
			if !resp.Cut {
				t.Fatalf("response was not cut")
			}
			r.envoy.Wait()
			if got := r.used(t, "tenant-tokens", tenantA); got < 20000 {
				t.Errorf("used: got %d, want at least the 20000 cap: thinking was on and the stream was cut before message_delta", got)
			}
		})
	}
}

// TestFineTunedReasoningModelCutStreamKeepsTheCap: the hidden-reasoning
// patterns (o1*, o3*, o4*, gpt-5*, …) match the model string from the
// start, so a reinforcement fine-tune of o4-mini ("ft:o4-mini-…"), which
// reasons unseen exactly as o4-mini does, escapes them. A stream cut
// before its usage chunk is then charged the output seen, while o4-mini
// itself keeps the cap (the control).
func TestFineTunedReasoningModelCutStreamKeepsTheCap(t *testing.T) {
	stream := fixture(t, "openai/chat_no_usage.sse")
	for _, model := range []string{"o4-mini", "ft:o4-mini-2025-04-16:acme::BcD3fGh1", "ft:gpt-5-mini-2025-08-07:acme:support:Xy12"} {
		t.Run(model, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
			body := []byte(`{"model":"` + model + `","stream":true,"max_completion_tokens":20000,"messages":[{"role":"user","content":"Think hard."}]}`)
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), sseUpstream(stream, 64, 3))
			if !resp.Cut {
				t.Fatalf("response was not cut")
			}
			r.envoy.Wait()
			if used := r.used(t, "tenant-tokens", tenantA); used < 20000 {
				t.Errorf("used: got %d, want at least the 20000 cap (a reasoning model's stream cut before its usage)", used)
			}
		})
	}
}

// TestModelAliasEscapesModelMatchedLimit: a limit matched to a model
// (`match: {model: gpt-4o-mini}`, the shape the configuration docs show)
// compares the body's model string exactly. The provider serves the same
// model under its dated snapshot names, so a caller who spells the model
// "gpt-4o-mini-2024-07-18" is not under the limit at all.
func TestModelAliasEscapesModelMatchedLimit(t *testing.T) {
	limit := tokensLimit("mini-tokens", 3000, "tenant")
	limit.Match = map[string]string{"model": "gpt-4o-mini"}
	r := newRig(t, []accounting.Limit{limit})
	for _, model := range []string{"gpt-4o-mini", "gpt-4o-mini-2024-07-18"} {
		t.Run(model, func(t *testing.T) {
			body := []byte(`{"model":"` + model + `","max_tokens":50000,"messages":[{"role":"user","content":"hello"}]}`)
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, []byte(`{"usage":{"prompt_tokens":8,"completion_tokens":50000}}`)))
			if resp.Status != 429 {
				t.Errorf("status: got %d, want 429: %q is gpt-4o-mini at the provider, and 50000 tokens exceed its 3000 limit", resp.Status, model)
			}
		})
	}
}

// TestPriorityServiceTierIsChargedMore: OpenAI bills service_tier
// "priority" at about twice the standard price (flex at half). The
// request field is not read and the cost is priced at the model's one
// price, so a tenant under a cost limit doubles what it may spend by
// asking for priority processing. Either the tier must be priced or the
// request refused.
func TestPriorityServiceTierIsChargedMore(t *testing.T) {
	limit := accounting.Limit{Name: "spend", Dimension: accounting.Cost, Scope: []string{"tenant"},
		Algorithm: accounting.FixedWindow, Limit: 1_000_000, Window: time.Hour}
	r := newRig(t, []accounting.Limit{limit})
	usage := []byte(`{"object":"chat.completion","service_tier":"%s","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`)
	cost := map[string]int64{}
	for _, tier := range []string{"default", "priority"} {
		tenant := "t-" + tier
		body := []byte(`{"model":"gpt-4.1","service_tier":"` + tier + `","max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}`)
		resp := r.envoy.Do(t.Context(), chatRequest(tenant, body), jsonUpstream(200, []byte(fmt.Sprintf(string(usage), tier))))
		if resp.Status == 400 {
			continue // refusing the tier is a fix too
		}
		wantStatus(t, resp, 200)
		r.envoy.Wait()
		cost[tier] = r.used(t, "spend", accounting.Attributes{{Name: "tenant", Value: tenant}})
	}
	if p, ok := cost["priority"]; ok && p <= cost["default"] {
		t.Errorf("cost of a priority request: got %d µ$, want more than the %d µ$ of the same request at the default tier (OpenAI bills priority at about 2×)",
			p, cost["default"])
	}
}

// TestShippedDefaultPricesBoundTheSpend runs the embedded default config
// (cmd/tokenwarden/default.yaml). Its tenant-daily-spend limit promises
// a tenant at most $50 a day. A model the file does not list is priced
// at models.default ($5 in, $15 out per 1M), and the body names the
// model: a tenant that asks for o1-pro (OpenAI lists it at $150 in, $600
// out per 1M) is booked 1/40 of what the provider bills, and so spends
// about $2,000 before its first 429.
func TestShippedDefaultPricesBoundTheSpend(t *testing.T) {
	cfg, err := config.Load("../cmd/tokenwarden/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ao := cfg.Accounting
	ao.Store = memstore.New(memstore.Options{})
	lim, err := accounting.New(ao)
	if err != nil {
		t.Fatal(err)
	}
	so := cfg.Server
	so.Limiter = lim
	srv, err := extproc.NewServer(so)
	if err != nil {
		t.Fatal(err)
	}
	e := envoytest.Start(t, srv, srv.ServerOptions()...)

	const (
		output     = 100_000
		listOutput = 600.0 // o1-pro, USD per 1M output tokens
		budget     = 50.0  // tenant-daily-spend
	)
	body := []byte(fmt.Sprintf(`{"model":"o1-pro","max_completion_tokens":%d,"messages":[{"role":"user","content":"Prove it."}]}`, output))
	reply := []byte(fmt.Sprintf(`{"object":"chat.completion","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":%d}}`, output))
	req := envoytest.Request{Path: "/v1/chat/completions", Body: body,
		Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "acme"}, {"x-tier", "paid"}}}
	var billed float64
	for i := 0; i < 200; i++ {
		resp := e.Do(t.Context(), req, jsonUpstream(200, reply))
		if resp.Status == 429 {
			break
		}
		wantStatus(t, resp, 200)
		e.Wait()
		billed += output * listOutput / 1e6
	}
	if billed > budget+output*listOutput/1e6 {
		t.Errorf("the provider billed $%.0f before the first 429, want at most the $%.0f daily budget and one request", billed, budget)
	}
}

// TestAzureV1PathsMapTheDeployment: Azure OpenAI's v1 API
// (/openai/v1/chat/completions, /openai/v1/responses, and the
// api-version form /openai/responses) takes the deployment's name in the
// body's "model", as the /openai/deployments/{d}/ paths take it in the
// path. azure.deployments is applied to the path form only, so the same
// deployment called through v1 is priced and matched under its
// deployment name: limits matched to the model it serves do not apply,
// its price is the default, and the hidden-reasoning patterns miss it.
func TestAzureV1PathsMapTheDeployment(t *testing.T) {
	for _, path := range []string{
		"/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", // the control
		"/openai/v1/chat/completions",
		"/openai/v1/chat/completions?api-version=preview",
	} {
		t.Run(path, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{
				{Name: "gpt-4o-only", Dimension: accounting.Requests, Scope: []string{"tenant"}, Match: map[string]string{"model": "gpt-4o"},
					Algorithm: accounting.FixedWindow, Limit: 1, Window: time.Hour},
			}, withServer(func(o *extproc.Options) { o.AzureDeployments = map[string]string{"prod-4o": "gpt-4o"} }))
			req := chatRequest("a", []byte(`{"model":"prod-4o","messages":[{"role":"user","content":"hi"}]}`))
			req.Path = path
			var up calledUpstream
			resp := r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
			wantStatus(t, resp, 200)
			if got := resp.Metadata[extproc.MetadataNamespace]["model"]; got != "gpt-4o" {
				t.Errorf("model: got %v, want gpt-4o, the model azure.deployments maps prod-4o to", got)
			}
			resp = r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
			if resp.Status != 429 {
				t.Errorf("second call: got %d, want 429 from the gpt-4o-only limit", resp.Status)
			}
		})
	}
}
