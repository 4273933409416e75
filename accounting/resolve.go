package accounting

import "strings"

// Resolution says how a model found its price.
type Resolution uint8

// How [Prices.Resolve] finds a model's price, in the order it tries.
const (
	// NoPrice: no entry, and no default.
	NoPrice Resolution = iota
	// ByName: an entry of the model's own name.
	ByName
	// ByFamily: the entry of its family ([ModelFamily]): a dated
	// snapshot, a provider's spelling, a fine-tune's base.
	ByFamily
	// ByPattern: the longest pattern ("gpt-4o*") whose prefix begins the
	// model's name or its family.
	ByPattern
	// ByDefault: the "default" entry.
	ByDefault
)

// String names the resolution for people.
func (r Resolution) String() string {
	switch r {
	case ByName:
		return "its own entry"
	case ByFamily:
		return "its family's entry"
	case ByPattern:
		return "the longest pattern"
	case ByDefault:
		return "the default"
	}
	return "no price"
}

// Resolve returns the key of the entry that prices model, and how it was
// found: the model's own entry, else its family's, else the longest
// pattern (a key ending in '*', matching every name that begins with
// what precedes it) that matches the model or its family, else the
// default. A pattern is a broad net: "gpt-4o*" also holds gpt-4o-mini,
// which an entry of its own (or its family's) prices apart.
func (p Prices) Resolve(model string) (string, Resolution) { return ResolveModel(p, model) }

// ResolveModel returns the key of entries that holds model's entry, and
// how it was found, by the rules of [Prices.Resolve]: one way to find a
// model's entry in every per-model table of the config.
func ResolveModel[V any](entries map[string]V, model string) (string, Resolution) {
	if _, ok := entries[model]; ok {
		return model, ByName
	}
	family := ModelFamily(model)
	if _, ok := entries[family]; ok {
		return family, ByFamily
	}
	best := ""
	for key := range entries {
		prefix, ok := strings.CutSuffix(key, "*")
		if !ok || len(key) <= len(best) {
			continue
		}
		if strings.HasPrefix(model, prefix) || strings.HasPrefix(family, prefix) {
			best = key
		}
	}
	if best != "" {
		return best, ByPattern
	}
	if _, ok := entries[DefaultModel]; ok {
		return DefaultModel, ByDefault
	}
	return "", NoPrice
}

// validPriceKey reports an error for a models key that is not a model
// name or a pattern (see [ValidModelKey]).
func validPriceKey(key string) error { return ValidModelKey("models", key) }

// ValidModelKey reports an error for a key of the per-model table
// section that is not a model name or a pattern: a '*' anywhere but at
// the end, or a pattern of nothing ("*" would be a second default). The
// error is a [FieldError] named by section and key.
func ValidModelKey(section, key string) error {
	i := strings.IndexByte(key, '*')
	switch {
	case key == "":
		return FieldErrorf(section, "a model name may not be empty")
	case key == "*":
		return FieldErrorf(section+".*", "a pattern of nothing; name the fallback default")
	case i >= 0 && i != len(key)-1:
		return FieldErrorf(section+"."+key, "'*' may only end a pattern")
	}
	return nil
}
