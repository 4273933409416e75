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
	return f.applyRaw(llm.BytesView(u.Raw))
}

// applyRaw is Apply on an object's raw bytes: it reads the members with
// the scanner, which finds whether the object is well-formed in the same
// pass, rather than checking it first and walking it with gjson after.
func (f *UsageFields) applyRaw(u []byte) (present, readable bool) {
	var seen [5]bool
	var scratch [40]byte
	it := llm.ScanObject(u)
	for k, v, more := it.Next(); more; k, v, more = it.Next() {
		var dst *int64
		var slot int
		switch llm.DecodeJSONString(k, scratch[:]) {
		case "cache_creation":
			if seen[4] || !f.applyBreakdown(v) {
				return present, false
			}
			seen[4] = true
			continue
		case "input_tokens":
			dst, slot = &f.Input, 0
		case "cache_creation_input_tokens":
			dst, slot = &f.CacheCreation, 1
		case "cache_read_input_tokens":
			dst, slot = &f.CacheRead, 2
		case "output_tokens":
			dst, slot = &f.Output, 3
		default:
			continue
		}
		if seen[slot] {
			return present, false
		}
		seen[slot] = true
		set, ok := setCount(dst, v)
		if !ok {
			return present, false
		}
		present = present || set
	}
	return present, it.WellFormed()
}

// applyBreakdown reads cache_creation, raw and well-formed, and reports
// whether it could.
func (f *UsageFields) applyBreakdown(v []byte) bool {
	if string(v) == "null" {
		return true
	}
	if v[0] != '{' {
		return false
	}
	f.Split = true
	var seen [2]bool
	var scratch [40]byte
	it := llm.ScanObject(v)
	for k, v, more := it.Next(); more; k, v, more = it.Next() {
		var dst *int64
		var slot int
		switch llm.DecodeJSONString(k, scratch[:]) {
		case "ephemeral_5m_input_tokens":
			dst, slot = &f.Ephemeral5m, 0
		case "ephemeral_1h_input_tokens":
			dst, slot = &f.Ephemeral1h, 1
		default:
			continue
		}
		if seen[slot] {
			return false
		}
		seen[slot] = true
		if _, ok := setCount(dst, v); !ok {
			return false
		}
	}
	return true
}

// setCount stores a token count (see llm.ReadCount), raw: set, it did;
// ok, the count was readable. A null leaves dst alone, as Anthropic sends
// null for a count it does not report.
func setCount(dst *int64, v []byte) (set, ok bool) {
	if string(v) == "null" {
		return false, true
	}
	n, ok := llm.ReadCountRaw(v)
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
