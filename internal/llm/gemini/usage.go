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

// ParseMetadata reads a usageMetadata object, and reports false for
// none, or for one that cannot be read unambiguously (see ReadMetadata).
func ParseMetadata(u gjson.Result) (Metadata, bool) {
	m, present, readable := ReadMetadata(u)
	return m, present && readable
}

// ReadMetadata reads a usageMetadata object. Zero fields are often
// omitted, so any object is a valid snapshot (present). Both the JSON
// names Google sends (camelCase) and the proto names (snake_case) are
// accepted. readable: u is well-formed JSON, each count it reads a
// non-negative JSON integer (see llm.ReadCount), each details list a
// list (or null) of objects, and no count or list there twice, under one
// name or both of its names: clients read a repeated member differently,
// so such a snapshot must not settle a request.
func ReadMetadata(u gjson.Result) (m Metadata, present, readable bool) {
	if !u.IsObject() {
		return m, false, true
	}
	if !llm.WellFormedObject(llm.BytesView(u.Raw)) {
		return Metadata{}, false, false
	}
	readable = true
	var seen [7]bool
	u.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		var slot int
		switch k.Str {
		case "promptTokenCount", "prompt_token_count":
			dst, slot = &m.Prompt, 0
		case "cachedContentTokenCount", "cached_content_token_count":
			dst, slot = &m.Cached, 1
		case "candidatesTokenCount", "candidates_token_count":
			dst, slot = &m.Candidates, 2
		case "thoughtsTokenCount", "thoughts_token_count":
			dst, slot = &m.Thoughts, 3
		case "toolUsePromptTokenCount", "tool_use_prompt_token_count":
			dst, slot = &m.ToolPrompt, 4
		case "promptTokensDetails", "prompt_tokens_details":
			slot = 5
		case "candidatesTokensDetails", "candidates_tokens_details":
			slot = 6
		default:
			return true
		}
		if seen[slot] {
			readable = false
			return false
		}
		seen[slot] = true
		switch slot {
		case 5:
			m.AudioPrompt, _, readable = modalityCounts(v, "AUDIO", "")
		case 6:
			m.AudioCandidates, m.ImageCandidates, readable = modalityCounts(v, "AUDIO", "IMAGE")
		default:
			*dst, readable = llm.ReadCount(v)
		}
		return readable
	})
	if !readable {
		return Metadata{}, true, false
	}
	return m, true, true
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

// modalityCounts sums the token counts of modalities a and b (b may be
// empty) in a list of ModalityTokenCount objects ({"modality": "AUDIO",
// "tokenCount": 120}), each saturating at accounting.MaxTokens, and
// reports whether the list could be read: null or a list of objects
// whose count, if any, is under one name, once, and readable, and whose
// modality, if any, is there once (a client that reads the last of
// "modality":"TEXT","modality":"AUDIO" prices audio where the first
// reads text).
func modalityCounts(list gjson.Result, a, b string) (na, nb int64, ok bool) {
	if list.Type == gjson.Null {
		return 0, 0, true
	}
	if !list.IsArray() {
		return 0, 0, false
	}
	ok = true
	list.ForEach(func(_, e gjson.Result) bool {
		if !e.IsObject() {
			ok = false
			return false
		}
		var n int64
		var modality gjson.Result
		counts, modalities := 0, 0
		e.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "tokenCount", "token_count":
				counts++
				n, ok = llm.ReadCount(v)
			case "modality":
				modalities++
				modality = v
			}
			return ok && counts < 2 && modalities < 2
		})
		if !ok || counts > 1 || modalities > 1 {
			ok = false
			return false
		}
		switch modality.Str {
		case a:
			na = accounting.ClampTokens(na + n)
		case b:
			nb = accounting.ClampTokens(nb + n)
		}
		return true
	})
	if !ok {
		return 0, 0, false
	}
	return na, nb, true
}
