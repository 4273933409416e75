package openai

import (
	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// eventUsageKeys are the usage members one stream event has shown:
// "usage", and "response" or "x_groq" (whose "usage" the reader reads).
// Each may appear once; clients read a repeated one differently (the Go
// SDKs the first, JSON.parse and Python the last), so a second makes the
// stream's usage unreadable rather than letting either settle it. An
// event may carry usage under both (Groq's last chunk, in "usage" and
// "x_groq"), but only the same usage: a client of one API reads one of
// them (the Responses API's, response.usage; chat's, usage), and the
// reader the last, so two that differ are unreadable too.
type eventUsageKeys struct {
	usage, nested bool
	read          bool // a usage object with counts was read: first
	first         accounting.Usage
}

// agree notes usage read from one of the event's usage members, and
// reports false if another one read differs from it.
func (k *eventUsageKeys) agree(u accounting.Usage) bool {
	if k.read {
		return u == k.first
	}
	k.read, k.first = true, u
	return true
}

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

// uniqueMemberRaw is llm.UniqueMember on a well-formed raw value.
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
