package extproc

import "strings"

// matchModel reports whether model matches pattern, in which '*' matches
// any run of characters (slashes included: model names carry provider
// prefixes) and everything else matches itself.
func matchModel(pattern, model string) bool {
	first := true
	for {
		star := strings.IndexByte(pattern, '*')
		if star < 0 {
			if first {
				return pattern == model
			}
			return strings.HasSuffix(model, pattern)
		}
		lit := pattern[:star]
		if first {
			if !strings.HasPrefix(model, lit) {
				return false
			}
			model = model[len(lit):]
		} else {
			i := strings.Index(model, lit)
			if i < 0 {
				return false
			}
			model = model[i+len(lit):]
		}
		pattern = pattern[star+1:]
		first = false
	}
}

// baseModel returns the model a name stands for: without a provider
// prefix ("openai/o3" is o3) and, for an OpenAI fine-tune
// ("ft:gpt-4o-mini-2024-07-18:org::id"), its base model.
func baseModel(model string) string {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	if rest, ok := strings.CutPrefix(model, "ft:"); ok {
		if i := strings.IndexByte(rest, ':'); i >= 0 {
			rest = rest[:i]
		}
		if rest != "" {
			model = rest
		}
	}
	return model
}
