package extproc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// explainCase is a request body sent to a path.
type explainCase struct {
	path string
	file string // a fixture under testdata, or
	body string // a body of its own
}

// requestFixtures returns a case for every request fixture in testdata,
// sent to the path its API's cases.json gives it. A fixture cases.json
// does not list fails t: it would be checked by nothing.
func requestFixtures(t *testing.T) []explainCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*", "*request*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no request fixtures: %v", err)
	}
	paths := map[string]string{}
	cases, _ := filepath.Glob(filepath.Join("..", "testdata", "*", "cases.json"))
	for _, c := range cases {
		var doc struct {
			Requests []struct{ File, Path string }
		}
		data, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		for _, r := range doc.Requests {
			paths[filepath.Join(filepath.Base(filepath.Dir(c)), r.File)] = r.Path
		}
	}
	var out []explainCase
	for _, f := range files {
		name := filepath.Join(filepath.Base(filepath.Dir(f)), filepath.Base(f))
		path, ok := paths[name]
		if !ok {
			t.Errorf("%s has no request entry in its cases.json", name)
			continue
		}
		out = append(out, explainCase{path: path, file: name})
	}
	return out
}

// pathVariants are fixtures sent to the other paths that reach their
// APIs: Azure OpenAI deployments (mapped and not), gateway prefixes,
// Vertex AI and tuned models, escaped methods and model ids; and paths
// and bodies the server does not meter or refuses.
var pathVariants = []explainCase{
	{path: "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", file: "openai/chat_request.json"},
	{path: "/openai/deployments/o4/chat/completions?api-version=2024-10-21", file: "openai/chat_request_stream.json"},
	{path: "/openai/deployments/prod-4o/extensions/chat/completions?api-version=2024-10-21", file: "openai/chat_request.json"},
	{path: "/openai/deployments/prod-4o/completions?api-version=2024-10-21", file: "openai/completions_request.json"},
	{path: "/openai/deployments/embed/embeddings?api-version=2024-10-21", file: "openai/embeddings_request.json"},
	{path: "/openai/deployments/prod-4o/chat/completions", body: `{"messages":[{"role":"user","content":"No model: Azure takes the deployment's."}]}`},
	{path: "/gateway/openai/v1/responses", file: "openai/responses_request_items.json"},
	{path: "/v1/responses", body: `{"model":"gpt-4o","input":"Later.","background":true}`},
	{path: "/anthropic/v1/messages", file: "anthropic/messages_request_blocks.json"},
	{path: "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse", file: "gemini/generate_request.json"},
	{path: "/v1beta/models/gemini-2.5-flash%3AgenerateContent", file: "gemini/stream_request_snake.json"},
	{path: "/v1beta/tunedModels/my-tuned:generateContent", file: "gemini/vertex_request.json"},
	{path: "/v1beta/models/:generateContent", file: "gemini/vertex_request.json"},
	{path: "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse-stream", file: "bedrock/converse_request.json"},
	{path: "/bedrock/model/amazon.nova-pro-v1%3A0/converse", file: "bedrock/converse_request.json"},
	{path: "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse", file: "bedrock/converse_stream_request.json"},
	{path: "/v1/threads/thread_1/messages", file: "anthropic/messages_request.json"},
	{path: "/v1/images/generations", file: "openai/chat_request.json"},
	{path: "/v1/Batches;x=1", body: `{"input_file_id":"file-1","endpoint":"/v1/chat/completions","completion_window":"24h"}`},
	{path: "/v1/models/gpt-4o", file: "openai/chat_request.json"},
	{path: "/v1/messages/count_tokens", file: "anthropic/messages_request.json"},
	{path: "/v1/chat/completions", body: ""},
	{path: "/v1/chat/completions", body: `{"model":"gpt-4o","messages":[],"max_tokens":5,"MAX_TOKENS":64000}`},
}

// TestExplainIsWhatTheServerReserves sends every request fixture, and
// the path variants, through the server behind the test Envoy and
// through Server.Explain, and requires the same answer from both: the
// same API, model and reservation (in tokens, and input alone, priced at
// a micro-dollar a token on a cost limit), the same refusal, or the same
// decision not to meter; and parts that sum to the input.
func TestExplainIsWhatTheServerReserves(t *testing.T) {
	lim, err := accounting.New(accounting.Options{
		Store: memstore.New(memstore.Options{}),
		Limits: []accounting.Limit{
			tokensLimit("tokens", 1<<40, "tenant"),
			{Name: "input", Dimension: accounting.Cost, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: 3600e9},
			{Name: "requests", Dimension: accounting.Requests, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: 3600e9},
		},
		// A micro-dollar per input token, nothing for output: the cost
		// reserved is the input estimate.
		Prices: accounting.Prices{"default": {Input: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := extproc.NewServer(extproc.Options{
		Limiter:          lim,
		Identity:         tenantIdentity,
		DefaultOutputCap: 1000,
		InjectOutputCap:  true,
		AzureDeployments: map[string]string{"prod-4o": "gpt-4o", "embed": "text-embedding-3-small"},
		RefuseBackground: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{envoy: envoytest.Start(t, srv, srv.ServerOptions()...), limiter: lim, store: lim.Store()}

	cases := append(requestFixtures(t), pathVariants...)
	var metered, refusedN, unmetered int
	for i, tc := range cases {
		name := tc.path + " " + tc.file
		t.Run(name, func(t *testing.T) {
			body := []byte(tc.body)
			if tc.file != "" {
				body = fixture(t, tc.file)
			}
			tenant := fmt.Sprint("t", i)
			attrs := accounting.Attributes{{Name: "tenant", Value: tenant}}

			e, explainErr := srv.Explain(tc.path, body)

			var reserved, input, requests int64
			req := envoytest.Request{Path: tc.path, Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", tenant}}, Body: body}
			resp := r.envoy.Do(t.Context(), req, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				// What the server reserved, read before the response
				// settles it.
				reserved, input, requests = r.used(t, "tokens", attrs), r.used(t, "input", attrs), r.used(t, "requests", attrs)
				return envoytest.UpstreamResponse{Status: 400, Headers: [][2]string{{"content-type", "application/json"}}, Chunks: [][]byte{[]byte(`{}`)}}
			})
			if resp.Err != nil {
				t.Fatalf("filter failed: %v", resp.Err)
			}

			var refused *extproc.RefusedError
			switch {
			case errors.As(explainErr, &refused):
				refusedN++
				if !resp.Local || resp.Status != refused.Status {
					t.Fatalf("Explain refuses with %v; the server answered %d (local %v): %s", refused, resp.Status, resp.Local, resp.Body)
				}
				msg, _ := json.Marshal(refused.Message)
				if !strings.Contains(string(resp.Body), strings.Trim(string(msg), `"`)) {
					t.Errorf("Explain refuses with %q; the server's reply says %s", refused.Message, resp.Body)
				}
			case explainErr != nil:
				t.Fatalf("Explain: %v", explainErr)
			case resp.Upstream == nil:
				t.Fatalf("Explain admits the request (%+v); the server answered %d: %s", e, resp.Status, resp.Body)
			case !e.Metered:
				unmetered++
				wantRequests := int64(1)
				if e.Passes {
					wantRequests = 0
				}
				if reserved != 0 || input != 0 || requests != wantRequests {
					t.Errorf("Explain does not meter the request (passes %v); the server reserved %d tokens, %d of input, %d requests", e.Passes, reserved, input, requests)
				}
			default:
				metered++
				md := resp.Metadata[extproc.MetadataNamespace]
				if md["api"] != e.API || md["model"] != e.Model {
					t.Errorf("Explain: api %q, model %q; the server's: %v, %v", e.API, e.Model, md["api"], md["model"])
				}
				if reserved != e.Estimate.Total() || md["estimate_tokens"] != float64(e.Estimate.Total()) {
					t.Errorf("Explain reserves %d tokens; the server reserved %d (estimate_tokens %v)", e.Estimate.Total(), reserved, md["estimate_tokens"])
				}
				if input != e.InputTokens || e.Estimate.InputTokens != e.InputTokens {
					t.Errorf("Explain counts %d input tokens (estimate %d); the server reserved %d", e.InputTokens, e.Estimate.InputTokens, input)
				}
				var sum int64
				for _, p := range e.Parts {
					sum += p.Tokens
				}
				if sum != e.InputTokens || len(e.Parts) == 0 {
					t.Errorf("the %d parts sum to %d, the input is %d: %+v", len(e.Parts), sum, e.InputTokens, e.Parts)
				}
			}
		})
	}
	// Each way a request can go must have been seen, or the comparison
	// proves less than it says.
	if metered < 20 || refusedN < 5 || unmetered < 3 {
		t.Errorf("%d metered, %d refused, %d unmetered requests: want at least 20, 5 and 3", metered, refusedN, unmetered)
	}
}

// TestExplain: what an Explanation says beyond the figures — the model's
// origin, where the cap came from and whether the server adds it, the
// notes on settlement — and what it says of requests it does not meter.
func TestExplain(t *testing.T) {
	lim, err := accounting.New(accounting.Options{Store: memStore()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := extproc.NewServer(extproc.Options{
		Limiter: lim, DefaultOutputCap: 1000, InjectOutputCap: true,
		AzureDeployments: map[string]string{"prod": "gpt-4o"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, body string
		want             extproc.Explanation // Parts and InputTokens aside
	}{
		{
			name: "the request's cap", path: "/v1/chat/completions",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"max_tokens":50,"n":2,"stream":true}`,
			want: extproc.Explanation{API: "openai.chat", Metered: true, Model: "gpt-4o", Stream: true, OutputCap: 50, CapSource: "max_tokens", Choices: 2},
		},
		{
			name: "the default cap, added to the body", path: "/v1/messages",
			body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":2000}}`,
			want: extproc.Explanation{API: "anthropic.messages", Metered: true, Model: "claude-sonnet-4-5", OutputCap: 3000,
				CapSource: "default_output_cap + thinking.budget_tokens", CapInjected: true, Choices: 1,
				Notes: []string{"the model reasons without streaming all of it: a response that reports no usage is charged its whole reservation"}},
		},
		{
			name: "an Azure deployment's model", path: "/openai/deployments/prod/chat/completions?api-version=2024-10-21",
			body: `{"model":"gpt-3.5-turbo","messages":[{"role":"user","content":"Hi"}]}`,
			want: extproc.Explanation{API: "openai.chat", Metered: true, Model: "gpt-4o", FromDeployment: true, OutputCap: 1000,
				CapSource: "default_output_cap", CapInjected: true, Choices: 1},
		},
		{
			name: "a format's notes, and a background response", path: "/v1/responses",
			body: `{"model":"gpt-4o","input":"Go on.","previous_response_id":"resp_1","background":true,"max_output_tokens":100}`,
			want: extproc.Explanation{API: "openai.responses", Metered: true, Model: "gpt-4o", OutputCap: 100, CapSource: "max_output_tokens", Choices: 1,
				Notes: []string{"previous_response_id: the earlier conversation is billed as input but not counted",
					"background: the reply carries no usage, so the request is charged its whole reservation"}},
		},
		{
			name: "embeddings have no output", path: "/v1/embeddings",
			body: `{"model":"text-embedding-3-small","input":"Hi"}`,
			want: extproc.Explanation{API: "openai.embeddings", Metered: true, Model: "text-embedding-3-small", Choices: 1},
		},
		{name: "not an LLM API", path: "/v1/messages/count_tokens", body: `{"model":"claude-sonnet-4-5","messages":[]}`, want: extproc.Explanation{Passes: true}},
		{name: "no body", path: "/v1/chat/completions", want: extproc.Explanation{API: "openai.chat"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := srv.Explain(tc.path, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got := *e
			got.Parts, got.InputTokens, got.Estimate = nil, 0, accounting.Estimate{}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if want := (accounting.Estimate{InputTokens: e.InputTokens, OutputTokens: e.OutputCap * max(e.Choices, 1)}); e.Estimate != want {
				t.Errorf("got estimate %+v, want %+v", e.Estimate, want)
			}
		})
	}
}

// TestExplainRefuses: a body the server refuses is the server's own
// reply, status and message.
func TestExplainRefuses(t *testing.T) {
	lim, err := accounting.New(accounting.Options{Store: memStore()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := extproc.NewServer(extproc.Options{Limiter: lim, RefuseBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"gpt-4o","messages":{}}`, "400 Invalid request: messages must be an array"},
		{"/v1/chat/completions", `{"model":"gpt-4o","messages":[],"max_tokens":1,"max_tokens":64000}`, `400 Invalid request: duplicate key "max_tokens"`},
		{"/v1/responses", `{"model":"gpt-4o","input":"x","background":true}`, "400 Invalid request: background responses are not allowed here"},
		{"/v1/messages", strings.Repeat("[", 100000), "400 Invalid request: "},
		{"/v1/messages", "{" + strings.Repeat(" ", 64<<20) + "}", "400 request body too large"},
	} {
		_, err := srv.Explain(tc.path, []byte(tc.body))
		var refused *extproc.RefusedError
		if !errors.As(err, &refused) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s %.40s: got error %v, want a RefusedError starting %q", tc.path, tc.body, err, tc.want)
		}
	}
}
