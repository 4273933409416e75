package bedrock

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
	"github.com/tokenwarden/tokenwarden/extproc/llm/llmtest"
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
