package bedrock

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// ParseUsage maps a Converse TokenUsage object onto accounting.Usage.
// inputTokens excludes cache reads and writes, so they are added to it.
func ParseUsage(u gjson.Result) (accounting.Usage, bool) {
	if !u.IsObject() {
		return accounting.Usage{}, false
	}
	var in, out, read, write int64
	ok := false
	u.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		switch k.Str {
		case "inputTokens":
			dst, ok = &in, true
		case "outputTokens":
			dst, ok = &out, true
		case "cacheReadInputTokens":
			dst = &read
		case "cacheWriteInputTokens":
			dst = &write
		default:
			return true
		}
		*dst = llm.TokenCount(v)
		return true
	})
	// Each count is at most accounting.MaxTokens, so the sum cannot
	// overflow; Clamp brings it back within bounds.
	return accounting.Usage{
		InputTokens:       in + read + write,
		CachedInputTokens: read,
		CacheWriteTokens:  write,
		OutputTokens:      out,
	}.Clamp(), ok
}
