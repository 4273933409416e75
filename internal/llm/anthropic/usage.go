package anthropic

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// UsageFields are the raw counts of Anthropic's usage object. Fields are
// replaced, never added, as the stream reports them: every report is a
// running total.
type UsageFields struct {
	Input         int64
	CacheCreation int64 // cache_creation_input_tokens: all cache writes
	CacheRead     int64
	Ephemeral5m   int64 // cache_creation.ephemeral_5m_input_tokens
	Ephemeral1h   int64 // cache_creation.ephemeral_1h_input_tokens
	Split         bool  // the cache_creation breakdown was present
	Output        int64
}

// Apply replaces the fields that u reports. Absent and null fields keep
// their value: message_delta repeats only some of them.
func (f *UsageFields) Apply(u gjson.Result) (ok bool) {
	if !u.IsObject() {
		return false
	}
	u.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "cache_creation" {
			if v.IsObject() {
				f.Split = true
				v.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "ephemeral_5m_input_tokens":
						setCount(&f.Ephemeral5m, v)
					case "ephemeral_1h_input_tokens":
						setCount(&f.Ephemeral1h, v)
					}
					return true
				})
			}
			return true
		}
		var dst *int64
		switch k.Str {
		case "input_tokens":
			dst = &f.Input
		case "cache_creation_input_tokens":
			dst = &f.CacheCreation
		case "cache_read_input_tokens":
			dst = &f.CacheRead
		case "output_tokens":
			dst = &f.Output
		default:
			return true
		}
		if setCount(dst, v) {
			ok = true
		}
		return true
	})
	return ok
}

// setCount stores a token count (see llm.TokenCount); non-numbers (null)
// leave dst alone.
func setCount(dst *int64, v gjson.Result) bool {
	if v.Type != gjson.Number {
		return false
	}
	*dst = llm.TokenCount(v)
	return true
}

// Usage maps the fields onto accounting.Usage: input is the sum of plain
// input, cache writes and cache reads; cache writes are split into 5-minute
// and 1-hour ones when Anthropic says which, and are otherwise all 5-minute
// ones (the default lifetime).
func (f *UsageFields) Usage() accounting.Usage {
	write5m, write1h := f.CacheCreation, int64(0)
	if f.Split {
		write5m, write1h = f.Ephemeral5m, f.Ephemeral1h
		// A total above the breakdown is charged at the 5-minute rate
		// rather than dropped.
		write5m += max(f.CacheCreation-f.Ephemeral5m-f.Ephemeral1h, 0)
	}
	// Each count is at most accounting.MaxTokens, so the sum cannot
	// overflow; Clamp brings it back within bounds.
	return accounting.Usage{
		InputTokens:        f.Input + write5m + write1h + f.CacheRead,
		CachedInputTokens:  f.CacheRead,
		CacheWriteTokens:   write5m,
		CacheWrite1hTokens: write1h,
		OutputTokens:       f.Output,
	}.Clamp()
}
