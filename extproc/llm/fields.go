package llm

import (
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// TopFields returns the named top-level fields of doc, in the order of
// names, reading the body once: a Get per field would rescan a body that
// can be megabytes (a long prompt sits before the fields that follow it).
// A name that occurs twice gives its first value, as gjson's Get would.
func TopFields(doc gjson.Result, names ...string) []gjson.Result {
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

// SetField returns body with the field at path (a gjson path such as
// "generationConfig.maxOutputTokens") set to value, creating the objects
// on the way. The rest of the body is kept byte for byte, as
// [API.Inject] promises.
func SetField(body []byte, path string, value any) ([]byte, error) {
	out, err := sjson.SetBytes(body, path, value)
	if err != nil {
		return nil, fmt.Errorf("editing request body: %w", err)
	}
	return out, nil
}
