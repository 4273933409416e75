package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// chatBody is a typical small chat request: a system prompt, two turns.
const chatBody = `{"model":"gpt-4o-mini","stream":true,"max_tokens":512,"messages":[` +
	`{"role":"system","content":"You are a terse assistant that answers questions about telecom specifications."},` +
	`{"role":"user","content":"What does 3GPP TS 23.501 specify?"},` +
	`{"role":"assistant","content":"The 5G system architecture."},` +
	`{"role":"user","content":"Which network functions take part in UE registration, and in what order?"}]}`

func request(tenant int) envoytest.Request {
	return envoytest.Request{
		Path: "/v1/chat/completions",
		Headers: [][2]string{
			{"content-type", "application/json"},
			{"x-tenant-id", "tenant-" + strconv.Itoa(tenant)},
			{"x-user-id", "user-" + strconv.Itoa(tenant*7%13)},
		},
		Body: []byte(chatBody),
	}
}

// upstreamFor returns a canned upstream answer: an OpenAI stream of 40
// content chunks plus the usage chunk, or the same as one JSON body.
func upstreamFor(scenario string) (envoytest.Upstream, error) {
	var chunks [][]byte
	var ct string
	switch scenario {
	case "sse":
		ct = "text/event-stream"
		for i := range 40 {
			chunks = append(chunks, fmt.Appendf(nil, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"token %d of the answer "},"finish_reason":null}],"usage":null}`+"\n\n", i))
		}
		chunks = append(chunks, []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":61,"completion_tokens":240,"total_tokens":301}}`+"\n\ndata: [DONE]\n\n"))
	case "json":
		ct = "application/json"
		chunks = [][]byte{[]byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			strings.Repeat("token of the answer ", 40) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":61,"completion_tokens":240,"total_tokens":301}}`)}
	default:
		return nil, fmt.Errorf("unknown scenario %q (want sse or json)", scenario)
	}
	return func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", ct}}, Chunks: chunks}
	}, nil
}
