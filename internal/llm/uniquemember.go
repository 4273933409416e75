package llm

import "github.com/tidwall/gjson"

// UniqueMember is v's member name, and reports false if v holds it more
// than once: clients read a repeated member differently (the Go SDKs the
// first, JSON.parse and Python the last), so a usage reader that finds
// its usage, or a count, twice cannot trust either. A v that is not an
// object has none.
func UniqueMember(v gjson.Result, name string) (gjson.Result, bool) {
	var found gjson.Result
	once := true
	if !v.IsObject() {
		return found, once
	}
	v.ForEach(func(k, m gjson.Result) bool {
		if k.Str != name {
			return true
		}
		if found.Exists() {
			once = false
			return false
		}
		found = m
		return true
	})
	return found, once
}
