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
	return llm.NewJSONReader(req.Model, opts, ParseUsage, ChatReplyText)
}

// ParseUsage maps an OpenAI usage object onto accounting.Usage, and
// reports false for none, or for one that cannot be read unambiguously
// (see readUsage): settlement then falls back as for a reply without
// usage.
func ParseUsage(u gjson.Result) (accounting.Usage, bool) {
	out, present, readable := readUsage(u)
	return out, present && readable
}

// usageSlot is each thing a usage object reports once: a count under
// either of its names (chat/completions' or the Responses API's), or a
// details object.
type usageSlot uint8

const (
	usageIn usageSlot = 1 << iota
	usageOut
	usageInDetails
	usageOutDetails
	usageCached
	usageAudio
)

// usageSlotOf is the slot of a member of a usage object, zero for a
// member readUsage does not read.
func usageSlotOf(name string) usageSlot {
	switch name {
	case "prompt_tokens", "input_tokens":
		return usageIn
	case "completion_tokens", "output_tokens":
		return usageOut
	case "prompt_tokens_details", "input_tokens_details":
		return usageInDetails
	case "completion_tokens_details", "output_tokens_details":
		return usageOutDetails
	}
	return 0
}

// detailSlotOf is the slot of a member of a details object.
func detailSlotOf(name string) usageSlot {
	switch name {
	case "cached_tokens":
		return usageCached
	case "audio_tokens":
		return usageAudio
	}
	return 0
}

// readUsage reads a usage object. It reads both the chat/completions
// names (prompt_tokens, completion_tokens) and the Responses API names
// (input_tokens, output_tokens). Cached and audio tokens are parts of
// the prompt, audio tokens a part of the completion, as OpenAI reports
// them (prompt_tokens_details, completion_tokens_details). present: u
// is an object with a prompt or completion count (not null). readable:
// every member it reads is unambiguous: the object is well-formed JSON,
// each count null or a non-negative JSON integer (see readCount), each
// details object an object (or null), and none of them there twice,
// under one name or both of its names. Clients read a repeated member
// differently (the first, the last), and an upstream that sends two
// must not settle on the smaller.
func readUsage(u gjson.Result) (out accounting.Usage, present, readable bool) {
	if !u.IsObject() {
		return accounting.Usage{}, false, true
	}
	// gjson reads what it can of malformed JSON, and leniently (.5 as
	// 5): the object must be JSON, as the fast paths' scanner reads it,
	// for its counts to be read.
	readable = llm.WellFormedObject(llm.BytesView(u.Raw))
	if !readable {
		return accounting.Usage{}, false, false
	}
	var seen usageSlot
	u.ForEach(func(k, v gjson.Result) bool {
		slot := usageSlotOf(k.Str)
		if slot == 0 {
			return true
		}
		if seen&slot != 0 {
			readable = false
			return false
		}
		seen |= slot
		var set, ok bool
		switch slot {
		case usageIn:
			out.InputTokens, set, ok = readCount(v)
			present = present || set
		case usageOut:
			out.OutputTokens, set, ok = readCount(v)
			present = present || set
		case usageInDetails:
			ok = readDetails(v, &out.CachedInputTokens, &out.AudioInputTokens)
		case usageOutDetails:
			ok = readDetails(v, nil, &out.AudioOutputTokens)
		}
		readable = ok
		return ok
	})
	// A cached count above the prompt would price negative input: Clamp
	// keeps it within.
	return out.Clamp(), present, readable
}

// readDetails reads a details object's cached_tokens (into *cached,
// unless it is nil) and audio_tokens, and reports whether it could.
func readDetails(d gjson.Result, cached, audio *int64) bool {
	if d.Type == gjson.Null {
		return true
	}
	if !d.IsObject() {
		return false
	}
	ok := true
	var seen usageSlot
	d.ForEach(func(k, v gjson.Result) bool {
		slot := detailSlotOf(k.Str)
		if slot == 0 || slot == usageCached && cached == nil {
			return true
		}
		if seen&slot != 0 {
			ok = false
			return false
		}
		seen |= slot
		if slot == usageCached {
			*cached, _, ok = readCount(v)
		} else {
			*audio, _, ok = readCount(v)
		}
		return ok
	})
	return ok
}

// readCount reads a count that may be null (see llm.ReadCount): set, it
// is a count; ok, it is null or readable. A null count is no count, as
// an absent one is, and as every client reads it (OpenAI's SDKs, nil or
// None; JSON.parse, null): servers that copy OpenAI send null for one
// they do not report, such as DashScope's and Dynamo's
// "prompt_tokens_details":{"audio_tokens":null,"cached_tokens":0}, Azure's
// embeddings' "completion_tokens":null, or Databricks' chunks before the
// last, with "completion_tokens":null.
func readCount(v gjson.Result) (n int64, set, ok bool) {
	if v.Type == gjson.Null {
		return 0, false, true
	}
	n, ok = llm.ReadCount(v)
	return n, ok, ok
}

// readCountRaw is readCount on a raw JSON value.
func readCountRaw(v []byte) (n int64, set, ok bool) {
	if string(v) == "null" {
		return 0, false, true
	}
	n, ok = llm.ReadCountRaw(v)
	return n, ok, ok
}

// readUsageRaw is readUsage on a well-formed usage object's raw bytes,
// for the stream reader's fast path: the same members, read the same
// way, without gjson's walk.
func readUsageRaw(u []byte) (out accounting.Usage, present, readable bool) {
	if len(u) == 0 || u[0] != '{' {
		return accounting.Usage{}, false, true
	}
	var seen usageSlot
	var scratch [32]byte
	it := llm.ScanObject(u)
	for k, v, more := it.Next(); more; k, v, more = it.Next() {
		slot := usageSlotOf(llm.DecodeJSONString(k, scratch[:]))
		if slot == 0 {
			continue
		}
		if seen&slot != 0 {
			return accounting.Usage{}, present, false
		}
		seen |= slot
		var set, ok bool
		switch slot {
		case usageIn:
			out.InputTokens, set, ok = readCountRaw(v)
			present = present || set
		case usageOut:
			out.OutputTokens, set, ok = readCountRaw(v)
			present = present || set
		case usageInDetails:
			ok = readDetailsRaw(v, &out.CachedInputTokens, &out.AudioInputTokens)
		case usageOutDetails:
			ok = readDetailsRaw(v, nil, &out.AudioOutputTokens)
		}
		if !ok {
			return accounting.Usage{}, present, false
		}
	}
	return out.Clamp(), present, true
}

// readDetailsRaw is readDetails on raw bytes.
func readDetailsRaw(d []byte, cached, audio *int64) bool {
	if string(d) == "null" {
		return true
	}
	if len(d) == 0 || d[0] != '{' {
		return false
	}
	var seen usageSlot
	var scratch [32]byte
	it := llm.ScanObject(d)
	for k, v, more := it.Next(); more; k, v, more = it.Next() {
		slot := detailSlotOf(llm.DecodeJSONString(k, scratch[:]))
		if slot == 0 || slot == usageCached && cached == nil {
			continue
		}
		if seen&slot != 0 {
			return false
		}
		seen |= slot
		var ok bool
		if slot == usageCached {
			*cached, _, ok = readCountRaw(v)
		} else {
			*audio, _, ok = readCountRaw(v)
		}
		if !ok {
			return false
		}
	}
	return true
}
