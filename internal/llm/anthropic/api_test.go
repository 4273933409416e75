package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

func TestInject(t *testing.T) {
	tests := []struct {
		name string
		body string
		opts llm.InjectOptions
		want string // max_tokens after the edit; "" for no edit
	}{
		{"absent", `{"model":"m","messages":[]}`, llm.InjectOptions{OutputCap: true}, "4096"},
		{"absent with thinking", `{"model":"m","messages":[],"thinking":{"type":"enabled","budget_tokens":10000}}`, llm.InjectOptions{OutputCap: true}, "14096"},
		{"given", `{"model":"m","max_tokens":5,"messages":[]}`, llm.InjectOptions{OutputCap: true}, ""},
		{"null", `{"model":"m","max_tokens":null,"messages":[]}`, llm.InjectOptions{OutputCap: true}, "4096"},
		{"escaped null", `{"model":"m","max_t\u006fkens":null,"messages":[]}`, llm.InjectOptions{OutputCap: true}, "4096"},
		{"not asked", `{"model":"m","messages":[]}`, llm.InjectOptions{StreamUsage: true}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Messages{}.ParseRequest("/v1/messages", []byte(tc.body), llmtest.ParseOptions())
			if err != nil {
				t.Fatal(err)
			}
			out, err := Messages{}.Inject([]byte(tc.body), &req, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(out, "max_tokens").Raw; got != tc.want {
				t.Errorf("got max_tokens %q, want %q (body %s)", got, tc.want, out)
			}
		})
	}
}

func TestRenderError(t *testing.T) {
	tests := []struct {
		kind llm.ErrorKind
		want string
	}{
		{llm.RateLimited, "rate_limit_error"},
		{llm.Unavailable, "api_error"},
		{llm.Unauthenticated, "authentication_error"},
		{llm.InvalidRequest, "invalid_request_error"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			reply := Messages{}.RenderError(llm.Error{Kind: tc.kind, Message: "why"})
			var got struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(reply.Body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Type != "error" || got.Error.Type != tc.want || got.Error.Message != "why" {
				t.Errorf("got %s, want type %q", reply.Body, tc.want)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	llmtest.CheckRefused(t, Messages{}, []llmtest.BadRequest{
		{Name: "not json", Body: `{"model":`},
		{Name: "array", Body: `[]`},
		{Name: "no model", Body: `{"messages":[]}`},
		{Name: "messages not array", Body: `{"model":"m","messages":{}}`},
		{Name: "message not object", Body: `{"model":"m","messages":["hi"]}`},
		{Name: "system number", Body: `{"model":"m","system":3,"messages":[]}`},
		{Name: "zero cap", Body: `{"model":"m","max_tokens":0,"messages":[]}`},
		{Name: "stream string", Body: `{"model":"m","stream":"yes","messages":[]}`},
		{Name: "bad budget", Body: `{"model":"m","messages":[],"thinking":{"type":"enabled","budget_tokens":-1}}`},
		{Name: "repeated cap", Body: `{"model":"m","max_tokens":1,"messages":[],"max_tokens":64000}`, Error: `duplicate key "max_tokens" in the request body`},
		{Name: "escaped repeated cap", Body: `{"model":"m","max_tokens":1,"messages":[],"max_tok\u0065ns":64000}`, Error: `duplicate key "max_tokens" in the request body`},
		{Name: "cap in capitals", Body: `{"model":"m","MAX_TOKENS":64000,"messages":[]}`, Error: `is "max_tokens" in another case`},
		{Name: "repeated model", Body: `{"model":"claude-haiku-4-5","messages":[],"model":"claude-opus-4-1"}`, Error: `duplicate key "model"`},
		{Name: "repeated budget", Body: `{"model":"m","messages":[],"thinking":{"type":"enabled","budget_tokens":1024,"budget_tokens":60000}}`,
			Error: `duplicate key "budget_tokens" in the request body at thinking`},
		{Name: "budget in another case", Body: `{"model":"m","messages":[],"thinking":{"type":"enabled","Budget_Tokens":60000}}`,
			Error: `is "budget_tokens" in another case`},
		{Name: "block text in another case", Body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","TEXT":"x"}]}]}`,
			Error: `at messages[0].content[0] is "text"`},
		{Name: "thinking a string", Body: `{"model":"m","messages":[],"thinking":"enabled"}`, Error: "thinking must be an object"},
		{Name: "thinking type a number", Body: `{"model":"m","messages":[],"thinking":{"type":1}}`, Error: "thinking.type must be a string"},
	})
}

func TestHiddenReasoning(t *testing.T) {
	tests := []struct {
		thinking string
		want     bool
	}{
		{``, false},
		{`,"thinking":null`, false},
		{`,"thinking":{"type":"enabled","budget_tokens":2048}`, true},
		{`,"thinking":{"type":"adaptive"}`, true},
		{`,"thinking":{"type":"disabled"}`, false},
	}
	for _, tc := range tests {
		body := `{"model":"m","max_tokens":5000,"messages":[]` + tc.thinking + `}`
		req, err := Messages{}.ParseRequest("/v1/messages", []byte(body), llmtest.ParseOptions())
		if err != nil || req.HiddenReasoning != tc.want {
			t.Errorf("%s: got hidden reasoning %v, error %v; want %v", body, req.HiddenReasoning, err, tc.want)
		}
	}
}

// TestUsageFieldsSplitRemainder: a cache_creation total above its
// breakdown is charged, at the 5-minute rate.
func TestUsageFieldsSplitRemainder(t *testing.T) {
	var f UsageFields
	f.Apply(gjson.Parse(`{"input_tokens":1,"cache_creation_input_tokens":50,"cache_creation":{"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":30}}`))
	u := f.Usage()
	if u.CacheWriteTokens != 20 || u.CacheWrite1hTokens != 30 || u.InputTokens != 51 {
		t.Errorf("got %+v, want 20 5m writes, 30 1h writes, 51 input", u)
	}
}

func TestStreamErrored(t *testing.T) {
	newReader := func() *StreamReader { return NewStreamReader("m", llmtest.ReaderOptions()) }
	llmtest.CheckErrored(t, fixtures, newReader, map[string]bool{"messages_stream_overloaded.sse": true, "messages_stream.sse": false})
}
