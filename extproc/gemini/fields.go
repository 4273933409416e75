package gemini

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// counterOf returns c, or the approximate counter when the caller set
// none: a missing counter must not crash request parsing.
func counterOf(c accounting.TokenCounter) accounting.TokenCounter {
	if c == nil {
		return accounting.Approximate{}
	}
	return c
}

// topFields returns the named top-level fields of doc, in the order of
// names, reading the body once: a Get per field would rescan a body that
// can be megabytes (a long prompt sits before the fields that follow it).
func topFields(doc gjson.Result, names ...string) []gjson.Result {
	out := make([]gjson.Result, len(names))
	doc.ForEach(func(k, v gjson.Result) bool {
		for i, n := range names {
			if k.Str == n && !out[i].Exists() {
				out[i] = v
			}
		}
		return true
	})
	return out
}
