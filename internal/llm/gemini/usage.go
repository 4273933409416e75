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
	return readMetadataRaw(llm.BytesView(u.Raw))
}

// readMetadataRaw is ReadMetadata on an object's raw bytes: it reads the
// members with the scanner, which finds whether the object is
// well-formed in the same pass (a Gemini stream carries usage on every
// event; gjson's walk and the scanner's, both, cost a fifth of reading
// the stream).
func readMetadataRaw(u []byte) (m Metadata, present, readable bool) {
	var seen [7]bool
	var scratch [32]byte
	it := llm.ScanObject(u)
	for k, v, more := it.Next(); more; k, v, more = it.Next() {
		var dst *int64
		var slot int
		switch llm.DecodeJSONString(k, scratch[:]) {
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
			continue
		}
		if seen[slot] {
			return Metadata{}, true, false
		}
		seen[slot] = true
		ok := true
		switch slot {
		case 5:
			m.AudioPrompt, _, ok = modalityCounts(v, "AUDIO", "")
		case 6:
			m.AudioCandidates, m.ImageCandidates, ok = modalityCounts(v, "AUDIO", "IMAGE")
		default:
			*dst, ok = llm.ReadCountRaw(v)
		}
		if !ok {
			return Metadata{}, true, false
		}
	}
	if !it.WellFormed() {
		return Metadata{}, false, false
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
// "tokenCount": 120}), raw and well-formed, each saturating at
// accounting.MaxTokens, and reports whether the list could be read: null
// or a list of objects whose count, if any, is under one name, once, and
// readable, and whose modality, if any, is there once (a client that
// reads the last of "modality":"TEXT","modality":"AUDIO" prices audio
// where the first reads text).
func modalityCounts(list []byte, a, b string) (na, nb int64, ok bool) {
	if string(list) == "null" {
		return 0, 0, true
	}
	if len(list) == 0 || list[0] != '[' {
		return 0, 0, false
	}
	var scratch [32]byte
	entries := llm.ScanArray(list)
	for _, e, more := entries.Next(); more; _, e, more = entries.Next() {
		if e[0] != '{' {
			return 0, 0, false
		}
		var n int64
		var modality []byte
		counted := false
		members := llm.ScanObject(e)
		for k, v, more := members.Next(); more; k, v, more = members.Next() {
			switch llm.DecodeJSONString(k, scratch[:]) {
			case "tokenCount", "token_count":
				if counted {
					return 0, 0, false
				}
				counted = true
				if n, ok = llm.ReadCountRaw(v); !ok {
					return 0, 0, false
				}
			case "modality":
				if modality != nil {
					return 0, 0, false
				}
				modality = v
			}
		}
		// gjson's reading of the modality: a string's text, "" for any
		// other value.
		var buf []byte
		text, _ := llm.JSONText(modality, &buf)
		switch text {
		case a:
			na = accounting.ClampTokens(na + n)
		case b:
			nb = accounting.ClampTokens(nb + n)
		}
	}
	return na, nb, true
}
