package openai

import "github.com/tokenwarden/tokenwarden/internal/llm"

// The fields each endpoint reads (see llm.Fields): llm.CheckBody refuses
// a body in which one of them is present twice, or in another case, so
// that the estimate and the provider read the same request.

// streamOptionsFields are the fields of stream_options.
var streamOptionsFields = llm.NewFields().Read("include_usage")

// chatContentFields are the fields of a chat message's content parts. A
// Scan visits them, and the content arrays (see scanChat).
var chatContentFields = llm.NewFields().
	Read("type", "text").
	Nest("image_url", chatImageFields).
	Visit()

// chatImageFields are the fields of an image_url part's image_url. A
// Scan visits it.
var chatImageFields = llm.NewFields().Read("url", "detail").Visit()

// chatMessageFields are the fields of a chat message. A Scan visits each
// message, and the messages array.
var chatMessageFields = llm.NewFields().
	Read("role", "name", "tool_calls", "function_call", "refusal", "audio").
	Nest("content", chatContentFields).
	Visit()

// chatFields are the fields Chat reads.
var chatFields = llm.NewFields().
	Read("model", "stream", "n", "max_tokens", "max_completion_tokens", "tools", "functions", "reasoning_effort", "service_tier").
	Nest("stream_options", streamOptionsFields).
	Nest("messages", chatMessageFields)

// completionsFields are the fields Completions reads.
var completionsFields = llm.NewFields().
	Read("model", "stream", "prompt", "suffix", "max_tokens", "n", "best_of").
	Nest("stream_options", streamOptionsFields)

// embeddingsFields are the fields Embeddings reads.
var embeddingsFields = llm.NewFields().Read("model", "stream", "input")

// responsesContentFields are the fields of a Responses input item's
// content parts, and of a tool call output's.
var responsesContentFields = llm.NewFields().Read("type", "text", "refusal", "detail", "image_url")

// responsesFields are the fields Responses reads.
var responsesFields = llm.NewFields().
	Read("model", "stream", "instructions", "tools", "previous_response_id", "conversation", "prompt",
		"max_output_tokens", "background", "service_tier").
	Nest("text", llm.NewFields().Read("format")).
	Nest("reasoning", llm.NewFields().Read("effort")).
	Nest("input", llm.NewFields().
		Read("type", "name", "arguments").
		Nest("content", responsesContentFields).
		Nest("output", responsesContentFields))
