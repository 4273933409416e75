package bedrock

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// ParseUsage maps a Converse TokenUsage object onto accounting.Usage,
// and reports false for none, or for one that cannot be read
// unambiguously (see readUsage): settlement then falls back as for a
// reply without usage.
func ParseUsage(u gjson.Result) (accounting.Usage, bool) {
	out, present, readable := readUsage(u)
	return out, present && readable
}

// readUsage reads a Converse TokenUsage object. inputTokens excludes
// cache reads and writes, so they are added to it. present: u is an
// object with an input or output count. readable: u is well-formed JSON,
// each count it reads a non-negative JSON integer (see llm.ReadCount),
// and none of them there twice.
func readUsage(u gjson.Result) (usage accounting.Usage, present, readable bool) {
	if !u.IsObject() {
		return accounting.Usage{}, false, true
	}
	if !llm.WellFormedObject(llm.BytesView(u.Raw)) {
		return accounting.Usage{}, false, false
	}
	var in, out, read, write int64
	readable = true
	var seen [4]bool
	u.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		var slot int
		switch k.Str {
		case "inputTokens":
			dst, slot, present = &in, 0, true
		case "outputTokens":
			dst, slot, present = &out, 1, true
		case "cacheReadInputTokens":
			dst, slot = &read, 2
		case "cacheWriteInputTokens":
			dst, slot = &write, 3
		default:
			return true
		}
		if seen[slot] {
			readable = false
			return false
		}
		seen[slot] = true
		*dst, readable = llm.ReadCount(v)
		return readable
	})
	if !readable {
		return accounting.Usage{}, present, false
	}
	// Each count is at most accounting.MaxTokens, so the sum cannot
	// overflow; Clamp brings it back within bounds.
	return accounting.Usage{
		InputTokens:       in + read + write,
		CachedInputTokens: read,
		CacheWriteTokens:  write,
		OutputTokens:      out,
	}.Clamp(), present, true
}
