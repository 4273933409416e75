package gemini

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Metadata is one usageMetadata snapshot.
type Metadata struct {
	Prompt     int64 // promptTokenCount, cached part included
	Cached     int64 // cachedContentTokenCount
	Candidates int64 // candidatesTokenCount, thoughts excluded
	Thoughts   int64 // thoughtsTokenCount
	ToolPrompt int64 // toolUsePromptTokenCount
	// The AUDIO part of the prompt, and the AUDIO and IMAGE parts of the
	// candidates, from promptTokensDetails and candidatesTokensDetails.
	AudioPrompt     int64
	AudioCandidates int64
	ImageCandidates int64
}

// ParseMetadata reads a usageMetadata object. Zero fields are often
// omitted, so any object is a valid snapshot. Both the JSON names Google
// sends (camelCase) and the proto names (snake_case) are accepted.
func ParseMetadata(u gjson.Result) (Metadata, bool) {
	var m Metadata
	if !u.IsObject() {
		return m, false
	}
	u.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		switch k.Str {
		case "promptTokenCount", "prompt_token_count":
			dst = &m.Prompt
		case "cachedContentTokenCount", "cached_content_token_count":
			dst = &m.Cached
		case "candidatesTokenCount", "candidates_token_count":
			dst = &m.Candidates
		case "thoughtsTokenCount", "thoughts_token_count":
			dst = &m.Thoughts
		case "toolUsePromptTokenCount", "tool_use_prompt_token_count":
			dst = &m.ToolPrompt
		case "promptTokensDetails", "prompt_tokens_details":
			m.AudioPrompt = modalityCount(v, "AUDIO")
			return true
		case "candidatesTokensDetails", "candidates_tokens_details":
			m.AudioCandidates = modalityCount(v, "AUDIO")
			m.ImageCandidates = modalityCount(v, "IMAGE")
			return true
		default:
			return true
		}
		*dst = llm.TokenCount(v)
		return true
	})
	return m, true
}

// Usage maps a snapshot onto accounting.Usage.
func (m Metadata) Usage() accounting.Usage {
	// Each count is at most accounting.MaxTokens, so the sums cannot
	// overflow; Clamp brings them back within bounds, and the cached
	// input within the input.
	return accounting.Usage{
		InputTokens:       m.Prompt + m.ToolPrompt,
		CachedInputTokens: m.Cached,
		AudioInputTokens:  m.AudioPrompt,
		OutputTokens:      m.Candidates + m.Thoughts,
		AudioOutputTokens: m.AudioCandidates,
		ImageOutputTokens: m.ImageCandidates,
	}.Clamp()
}

// modalityCount sums the token counts of one modality in a list of
// ModalityTokenCount objects ({"modality": "AUDIO", "tokenCount": 120}),
// saturating at accounting.MaxTokens.
func modalityCount(list gjson.Result, modality string) int64 {
	var n int64
	list.ForEach(func(_, e gjson.Result) bool {
		if e.Get("modality").Str == modality {
			c := e.Get("tokenCount")
			if !c.Exists() {
				c = e.Get("token_count")
			}
			n = accounting.ClampTokens(n + llm.TokenCount(c))
		}
		return true
	})
	return n
}
