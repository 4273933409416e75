package openai

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// eventUsageKeys are the usage members one stream event has shown:
// "usage", and "response" or "x_groq" (whose "usage" the reader reads).
// Each may appear once; clients read a repeated one differently (the Go
// SDKs the first, JSON.parse and Python the last), so a second makes the
// stream's usage unreadable rather than letting either settle it.
type eventUsageKeys struct{ usage, nested bool }

// add notes a usage member, and reports false for one the event has
// shown already.
func (k *eventUsageKeys) add(key eventKey) bool {
	seen := &k.usage
	if key == keyNestedUsage {
		seen = &k.nested
	}
	if *seen {
		return false
	}
	*seen = true
	return true
}

// uniqueMember is v's member name, and reports false if v holds it more
// than once. A v that is not an object has none.
func uniqueMember(v gjson.Result, name string) (gjson.Result, bool) {
	var found gjson.Result
	ok := true
	if !v.IsObject() {
		return found, ok
	}
	v.ForEach(func(k, m gjson.Result) bool {
		if k.Str != name {
			return true
		}
		if found.Exists() {
			ok = false
			return false
		}
		found = m
		return true
	})
	return found, ok
}

// uniqueMemberRaw is uniqueMember on a well-formed raw value.
func uniqueMemberRaw(v []byte, name string) ([]byte, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, true
	}
	var found []byte
	var scratch [32]byte
	it := llm.ScanObject(v)
	for k, m, more := it.Next(); more; k, m, more = it.Next() {
		if llm.DecodeJSONString(k, scratch[:]) != name {
			continue
		}
		if found != nil {
			return nil, false
		}
		found = m
	}
	return found, true
}
