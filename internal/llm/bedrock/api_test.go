package bedrock

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

func TestModelFromPath(t *testing.T) {
	llmtest.CheckPaths(t, ModelFromPath, MatchPath, []llmtest.PathCase{
		{Path: "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse", Model: "anthropic.claude-3-5-sonnet-20240620-v1:0", OK: true},
		{Path: "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream", Model: "anthropic.claude-3-5-sonnet-20240620-v1:0", Stream: true, OK: true},
		{Path: "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.amazon.nova-pro-v1%3A0/converse?x=1",
			Model: "arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-pro-v1:0", OK: true},
		{Path: "/bedrock/model/amazon.nova-lite-v1:0/converse/", Model: "amazon.nova-lite-v1:0", OK: true},
		{Path: "/model/amazon.nova-lite-v1:0/invoke"},
		{Path: "/model//converse"},
		// Decoded, an ARN holds a slash: a model id may hold one too.
		{Path: "/model/a/b/converse", Model: "a/b", OK: true},
		// An invalid escape is kept, as lenient servers keep it.
		{Path: "/model/%zz/converse", Model: "%zz", OK: true},
		{Path: "/model/m%2Fconverse", Model: "m", OK: true},
		{Path: "/model/m/converse%2Dstream", Model: "m", Stream: true, OK: true},
		{Path: "/converse"},
	})
}

func TestInject(t *testing.T) {
	body := `{"messages":[],"inferenceConfig":{"temperature":0.5}}`
	req, err := Converse{}.ParseRequest("/model/m/converse", []byte(body), llmtest.ParseOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, err := Converse{}.Inject([]byte(body), &req, llm.InjectOptions{OutputCap: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "inferenceConfig.maxTokens").Int(); got != 4096 {
		t.Errorf("got maxTokens %d, want 4096 (body %s)", got, out)
	}
	if got := gjson.GetBytes(out, "inferenceConfig.temperature").Float(); got != 0.5 {
		t.Errorf("lost temperature: %s", out)
	}
	req.CapGiven = true
	if out, _ := (Converse{}).Inject([]byte(body), &req, llm.InjectOptions{OutputCap: true}); out != nil {
		t.Errorf("got edit %s with the cap given, want none", out)
	}
}

func TestInjectEdits(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"no config", `{"messages":[]}`, `{"messages":[],"inferenceConfig":{"maxTokens":4096}}`},
		{"null config", `{"messages":[],"inferenceConfig":null}`, `{"messages":[],"inferenceConfig":{"maxTokens":4096}}`},
		{"null cap", `{"messages":[],"inferenceConfig":{"maxTokens":null}}`, `{"messages":[],"inferenceConfig":{"maxTokens":4096}}`},
		{"thinking budget", `{"messages":[],"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":2048}}}`,
			`{"messages":[],"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":2048}},"inferenceConfig":{"maxTokens":6144}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Converse{}.ParseRequest("/model/m/converse", []byte(tc.body), llmtest.ParseOptions())
			if err != nil {
				t.Fatal(err)
			}
			out, err := Converse{}.Inject([]byte(tc.body), &req, llm.InjectOptions{OutputCap: true})
			if err != nil || string(out) != tc.want {
				t.Errorf("got  %s (%v)\nwant %s", out, err, tc.want)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	const path = "/model/m/converse"
	llmtest.CheckRefused(t, Converse{}, []llmtest.BadRequest{
		{Name: "repeated cap", Path: path, Body: `{"messages":[],"inferenceConfig":{"maxTokens":1,"maxTokens":64000}}`,
			Error: `duplicate key "maxTokens" in the request body at inferenceConfig`},
		{Name: "repeated config", Path: path, Body: `{"messages":[],"inferenceConfig":{"maxTokens":1},"inferenceConfig":{}}`,
			Error: `duplicate key "inferenceConfig" in the request body`},
		{Name: "cap in another case", Path: path, Body: `{"messages":[],"inferenceConfig":{"MaxTokens":64000}}`, Error: `is "maxTokens" in another case`},
		{Name: "config an array", Path: path, Body: `{"messages":[],"inferenceConfig":[]}`, Error: "inferenceConfig must be an object"},
		{Name: "repeated budget", Path: path, Body: `{"messages":[],"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024,"budget_tokens":9}}}`,
			Error: `duplicate key "budget_tokens" in the request body at additionalModelRequestFields.thinking`},
		{Name: "additional fields a string", Path: path, Body: `{"messages":[],"additionalModelRequestFields":"x"}`, Error: "additionalModelRequestFields must be an object"},
		{Name: "text in another case", Path: path, Body: `{"messages":[{"role":"user","content":[{"Text":"x"}]}]}`, Error: `at messages[0].content[0] is "text"`},
		{Name: "messages not an array", Path: path, Body: `{"messages":{}}`, Error: "messages must be an array"},
		{Name: "not an object", Path: path, Body: `[]`, Error: "must be a JSON object"},
	})
}

func TestHiddenReasoning(t *testing.T) {
	tests := []struct {
		additional string
		want       bool
	}{
		{`{}`, false},
		{`{"thinking":{"type":"enabled","budget_tokens":1024}}`, true},
		{`{"thinking":{"type":"disabled"}}`, false},
		{`{"reasoningConfig":{"type":"enabled","maxReasoningEffort":"low"}}`, true},
		{`{"reasoningConfig":{"type":"disabled"}}`, false},
		{`{"reasoningConfig":null,"thinking":null}`, false},
	}
	for _, tc := range tests {
		body := `{"messages":[],"additionalModelRequestFields":` + tc.additional + `}`
		req, err := Converse{}.ParseRequest("/model/m/converse", []byte(body), llmtest.ParseOptions())
		if err != nil || req.HiddenReasoning != tc.want {
			t.Errorf("%s: got hidden reasoning %v, error %v; want %v", body, req.HiddenReasoning, err, tc.want)
		}
	}
}

func TestRenderError(t *testing.T) {
	tests := []struct {
		kind llm.ErrorKind
		want string
	}{
		{llm.RateLimited, "ThrottlingException"},
		{llm.Unavailable, "ServiceUnavailableException"},
		{llm.Unauthenticated, "AccessDeniedException"},
		{llm.InvalidRequest, "ValidationException"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			reply := Converse{}.RenderError(llm.Error{Kind: tc.kind, Message: "why"})
			var got struct{ Message string }
			if err := json.Unmarshal(reply.Body, &got); err != nil || got.Message != "why" {
				t.Errorf("got body %s (%v), want {\"message\":\"why\"}", reply.Body, err)
			}
			if len(reply.Headers) != 1 || reply.Headers[0] != [2]string{"x-amzn-errortype", tc.want} {
				t.Errorf("got headers %v, want x-amzn-errortype: %s", reply.Headers, tc.want)
			}
		})
	}
}

func TestStreamReaderReportsErrors(t *testing.T) {
	r := NewStreamReader("m", llmtest.ReaderOptions())
	r.Write(fixtures.Read(t, "converse_stream_throttled.eventstream"))
	if !r.Errored() || r.Err() != nil {
		t.Errorf("got errored %v err %v, want an exception and no framing error", r.Errored(), r.Err())
	}
	r = NewStreamReader("m", llmtest.ReaderOptions())
	r.Write(fixtures.Read(t, "converse_stream_bad_crc.eventstream"))
	if r.Err() == nil {
		t.Error("got no framing error for a corrupt frame")
	}
}

// TestNativeMaxTokens: Claude on Bedrock reads its own max_tokens from
// additionalModelRequestFields when inferenceConfig names no cap; with
// cap injection off, reserving the default instead would let it generate
// far more than was reserved.
func TestNativeMaxTokens(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantCap int64
		given   bool
	}{
		{"native only", `{"messages":[],"additionalModelRequestFields":{"max_tokens":64000}}`, 64000, true},
		{"both: the larger", `{"messages":[],"inferenceConfig":{"maxTokens":10},"additionalModelRequestFields":{"max_tokens":64000}}`, 64000, true},
		{"neither: the default", `{"messages":[],"additionalModelRequestFields":{}}`, 4096, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Converse{}.ParseRequest("/model/anthropic.claude-sonnet-4-5-v1:0/converse", []byte(tt.body), llmtest.ParseOptions())
			if err != nil {
				t.Fatal(err)
			}
			if req.OutputCap != tt.wantCap || req.CapGiven != tt.given {
				t.Errorf("got cap %d (given %v), want %d (given %v)", req.OutputCap, req.CapGiven, tt.wantCap, tt.given)
			}
		})
	}
	if _, err := (Converse{}).ParseRequest("/model/m/converse", []byte(`{"messages":[],"additionalModelRequestFields":{"max_tokens":"big"}}`), llmtest.ParseOptions()); err == nil {
		t.Error("got no error for a non-integer native max_tokens")
	}
}
