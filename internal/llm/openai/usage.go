package openai

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// NewUsageReader implements llm.API.
func (Chat) NewUsageReader(req *llm.Request, contentType string, opts llm.ReaderOptions) llm.UsageReader {
	if llm.IsEventStream(contentType) {
		return NewStreamReader(req.Model, opts, ChatDeltaText)
	}
	return llm.NewJSONReader(opts, ParseUsage)
}

// ParseUsage maps an OpenAI usage object onto accounting.Usage. It reads
// both the chat/completions names (prompt_tokens, completion_tokens) and
// the Responses API names (input_tokens, output_tokens). Cached and audio
// tokens are parts of the prompt, audio tokens a part of the completion,
// as OpenAI reports them (prompt_tokens_details, completion_tokens_details).
func ParseUsage(u gjson.Result) (accounting.Usage, bool) {
	if !u.IsObject() {
		return accounting.Usage{}, false
	}
	var out accounting.Usage
	ok := false
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens", "input_tokens":
			out.InputTokens, ok = llm.TokenCount(v), true
		case "completion_tokens", "output_tokens":
			out.OutputTokens, ok = llm.TokenCount(v), true
		case "prompt_tokens_details", "input_tokens_details":
			out.CachedInputTokens = llm.TokenCount(v.Get("cached_tokens"))
			out.AudioInputTokens = llm.TokenCount(v.Get("audio_tokens"))
		case "completion_tokens_details", "output_tokens_details":
			out.AudioOutputTokens = llm.TokenCount(v.Get("audio_tokens"))
		}
		return true
	})
	// A cached count above the prompt would price negative input: Clamp
	// keeps it within.
	return out.Clamp(), ok
}

// parseUsageRaw is ParseUsage on a well-formed usage object's raw bytes,
// for the stream reader's fast path: the same fields, read the same way,
// without gjson's walk.
func parseUsageRaw(u []byte) (accounting.Usage, bool) {
	if len(u) == 0 || u[0] != '{' {
		return accounting.Usage{}, false
	}
	var out accounting.Usage
	ok := false
	var scratch [32]byte
	it := llm.ScanObject(u)
	for k, v, more := it.Next(); more; k, v, more = it.Next() {
		switch llm.DecodeJSONString(k, scratch[:]) {
		case "prompt_tokens", "input_tokens":
			out.InputTokens, ok = llm.TokenCountRaw(v), true
		case "completion_tokens", "output_tokens":
			out.OutputTokens, ok = llm.TokenCountRaw(v), true
		case "prompt_tokens_details", "input_tokens_details":
			cached, _ := llm.JSONMember(v, "cached_tokens")
			out.CachedInputTokens = llm.TokenCountRaw(cached)
			audio, _ := llm.JSONMember(v, "audio_tokens")
			out.AudioInputTokens = llm.TokenCountRaw(audio)
		case "completion_tokens_details", "output_tokens_details":
			audio, _ := llm.JSONMember(v, "audio_tokens")
			out.AudioOutputTokens = llm.TokenCountRaw(audio)
		}
	}
	return out.Clamp(), ok
}
