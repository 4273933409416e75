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
// their value: message_delta repeats only some of them. present: u set
// a count. readable: u is well-formed JSON whose counts are each null or
// a non-negative JSON integer (see llm.ReadCount), its cache_creation an
// object or null, and none of them there twice; clients read a repeated
// member differently, so usage that is not readable must not settle a
// request (the fields then mean nothing).
func (f *UsageFields) Apply(u gjson.Result) (present, readable bool) {
	if !u.IsObject() {
		return false, true
	}
	if !llm.WellFormedObject(llm.BytesView(u.Raw)) {
		return false, false
	}
	readable = true
	var seen [5]bool
	u.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		var slot int
		switch k.Str {
		case "cache_creation":
			if seen[4] {
				readable = false
				return false
			}
			seen[4] = true
			readable = f.applyBreakdown(v)
			return readable
		case "input_tokens":
			dst, slot = &f.Input, 0
		case "cache_creation_input_tokens":
			dst, slot = &f.CacheCreation, 1
		case "cache_read_input_tokens":
			dst, slot = &f.CacheRead, 2
		case "output_tokens":
			dst, slot = &f.Output, 3
		default:
			return true
		}
		if seen[slot] {
			readable = false
			return false
		}
		seen[slot] = true
		set, ok := setCount(dst, v)
		present = present || set
		readable = ok
		return ok
	})
	return present, readable
}

// applyBreakdown reads cache_creation, and reports whether it could.
func (f *UsageFields) applyBreakdown(v gjson.Result) bool {
	if v.Type == gjson.Null {
		return true
	}
	if !v.IsObject() {
		return false
	}
	f.Split = true
	ok := true
	var seen [2]bool
	v.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		var slot int
		switch k.Str {
		case "ephemeral_5m_input_tokens":
			dst, slot = &f.Ephemeral5m, 0
		case "ephemeral_1h_input_tokens":
			dst, slot = &f.Ephemeral1h, 1
		default:
			return true
		}
		if seen[slot] {
			ok = false
			return false
		}
		seen[slot] = true
		_, ok = setCount(dst, v)
		return ok
	})
	return ok
}

// setCount stores a token count (see llm.ReadCount): set, it did; ok,
// the count was readable. A null leaves dst alone, as Anthropic sends
// null for a count it does not report.
func setCount(dst *int64, v gjson.Result) (set, ok bool) {
	if v.Type == gjson.Null {
		return false, true
	}
	n, ok := llm.ReadCount(v)
	if !ok {
		return false, false
	}
	*dst = n
	return true, true
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
