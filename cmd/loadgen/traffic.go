package main

import (
	"fmt"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// chatBody is a typical chat request of about 2 KB: a system prompt and
// several turns, streamed, with an output cap and without stream_options,
// so that a server with the default config adds include_usage (the
// common case: the SDKs do not ask for it).
var chatBody = func() string {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","stream":true,"max_tokens":512,"temperature":0.2,"messages":[`)
	b.WriteString(`{"role":"system","content":"You are a terse assistant that answers questions about telecom specifications. Quote the clause you rely on, and say so when a question falls outside the 3GPP series."}`)
	turns := [][2]string{
		{"What does 3GPP TS 23.501 specify?", "The 5G system architecture: the network functions, their reference points and the service-based interfaces between them."},
		{"Which network functions take part in UE registration, and in what order?", "The AMF receives the Registration Request, selects an AUSF to authenticate the UE, fetches subscription data from the UDM, and may involve the PCF for access and mobility policy."},
		{"Where is the AMF selection procedure described?", "TS 23.501 clause 6.3.5 describes AMF selection; TS 23.502 clause 4.2.2.2 gives the registration call flow."},
		{"And how does the AUSF learn the serving network name?", "The AMF/SEAF includes it in the Nudm_UEAuthentication request it sends through the AUSF, as TS 33.501 clause 6.1.3 describes."},
		{"Which clause covers the SUCI de-concealment?", "TS 33.501 clause 6.12.5: the SIDF in the UDM de-conceals the SUCI into the SUPI during authentication."},
		{"Does the SMF take part in registration?", "Not in initial registration itself; the SMF is involved when PDU sessions are re-activated or when a registration update affects existing sessions."},
		{"What does the PCF provide to the AMF?", "Access and mobility policy: service area restrictions, RFSP index and UE policy, delivered over Npcf_AMPolicyControl."},
	}
	for _, t := range turns {
		fmt.Fprintf(&b, `,{"role":"user","content":%q},{"role":"assistant","content":%q}`, t[0], t[1])
	}
	b.WriteString(`,{"role":"user","content":"Summarise the registration call flow in five steps, naming the service operation used at each step."}]}`)
	return b.String()
}()

// sseChunks is an OpenAI chat stream of seven chunks, one event each, as
// the provider sends them: the role, three text deltas, the finish
// reason, the usage chunk, and [DONE].
func sseChunks() [][]byte {
	const id = `"id":"chatcmpl-C9xQm2bW7nKpL4tYvR8sZ1aD3eF5g","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_560af6e559"`
	choices := []string{
		`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{"content":"1. The UE sends a Registration Request to the AMF. "},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{"content":"2. The AMF asks the AUSF to authenticate it (Nausf_UEAuthentication). "},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{"content":"3. The AMF registers with the UDM and fetches subscription data (Nudm_UECM, Nudm_SDM)."},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`,
	}
	var chunks [][]byte
	for _, c := range choices {
		chunks = append(chunks, []byte(`data: {`+id+`,"choices":[`+c+`],"usage":null,"obfuscation":"Xk3q"}`+"\n\n"))
	}
	chunks = append(chunks, []byte(`data: {`+id+`,"choices":[],"usage":{"prompt_tokens":412,"completion_tokens":61,"total_tokens":473,`+
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"m"}`+"\n\n"))
	return append(chunks, []byte("data: [DONE]\n\n"))
}

// jsonReply is the same answer as one JSON body.
const jsonReply = `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"1. The UE sends a Registration Request to the AMF. 2. The AMF asks the AUSF to authenticate it. 3. The AMF registers with the UDM and fetches subscription data.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":412,"completion_tokens":61,"total_tokens":473,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}},"system_fingerprint":"fp_560af6e559"}`

// traffic is one lifecycle's messages, built once: Envoy's side of the
// stream, as the filter with tokenwarden's documented config sends it.
// gRPC only reads a message to send it, so every stream shares them.
type traffic struct {
	// headers are the request headers of each tenant, in the stream's
	// first message (with protocol_config).
	headers []*extprocv3.ProcessingRequest
	body    *extprocv3.ProcessingRequest
	// response is the upstream's response headers, then its body chunks.
	response *extprocv3.ProcessingRequest
	chunks   []*extprocv3.ProcessingRequest
}

// newTraffic builds the messages of scenario ("sse" or "json") for that
// many tenants.
func newTraffic(scenario string, tenants int) (*traffic, error) {
	var ct string
	var chunks [][]byte
	switch scenario {
	case "sse":
		ct, chunks = "text/event-stream; charset=utf-8", sseChunks()
	case "json":
		ct, chunks = "application/json", [][]byte{[]byte(jsonReply)}
	default:
		return nil, fmt.Errorf("unknown scenario %q (want sse or json)", scenario)
	}
	if tenants < 1 {
		return nil, fmt.Errorf("-tenants must be positive")
	}
	t := &traffic{}
	for i := range tenants {
		h := headerMap(
			":method", "POST", ":path", "/v1/chat/completions", ":authority", "api.openai.com", ":scheme", "https",
			"content-type", "application/json", "content-length", strconv.Itoa(len(chatBody)),
			"authorization", "Bearer sk-loadgen", "user-agent", "OpenAI/Python 1.99.0",
			"x-tenant-id", "tenant-"+strconv.Itoa(i), "x-user-id", "user-"+strconv.Itoa(i*7%13),
			"x-request-id", "0b6c5d4e-8f1a-4c2b-9d3e-7a6f5e4d3c2b")
		t.headers = append(t.headers, &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: h}},
			ProtocolConfig: &extprocv3.ProtocolConfiguration{
				RequestBodyMode:  filterv3.ProcessingMode_BUFFERED,
				ResponseBodyMode: filterv3.ProcessingMode_STREAMED,
			},
		})
	}
	t.body = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(chatBody), EndOfStream: true}}}
	// OpenAI's own rate-limit headers come with every response; the
	// router adds x-envoy-upstream-service-time. The shipped envoy.yaml
	// asks for response_attributes: [response.code_details], so Envoy
	// sends that attribute with them.
	t.response = &extprocv3.ProcessingRequest{
		Attributes: map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{
			"response.code_details": structpb.NewStringValue("via_upstream")}}},
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(
			":status", "200", "content-type", ct, "date", "Thu, 01 Jan 2026 00:00:00 GMT",
			"openai-organization", "org-loadgen", "openai-processing-ms", "212", "openai-version", "2020-10-01",
			"x-ratelimit-limit-requests", "10000", "x-ratelimit-limit-tokens", "30000000",
			"x-ratelimit-remaining-requests", "9999", "x-ratelimit-remaining-tokens", "29999500",
			"x-ratelimit-reset-requests", "6ms", "x-ratelimit-reset-tokens", "0s",
			"x-request-id", "req_4b7c1d2e3f", "x-envoy-upstream-service-time", "211")}}}
	for i, c := range chunks {
		t.chunks = append(t.chunks, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: c, EndOfStream: i == len(chunks)-1}}})
	}
	return t, nil
}

// headerMap builds Envoy's header map from key, value pairs: raw_value,
// as Envoy sends them.
func headerMap(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}
