package accounting

import "strings"

// AttributeModel is the attribute that holds a request's model. Limits
// match and scope it by family (see [ModelFamily]).
const AttributeModel = "model"

// ModelFamily returns the model a name stands for, so that the many
// spellings of one model share its price and its limits:
//
//   - a provider or route prefix is dropped ("openai/gpt-4o" and a
//     Bedrock ARN's ".../us.anthropic.claude-…" keep what follows the
//     last '/');
//   - an OpenAI fine-tune is its base ("ft:gpt-4o-mini-2024-07-18:org::id");
//   - Bedrock's cross-region prefix ("us.", "eu.", "apac.", "global.")
//     and vendor prefix ("anthropic.", "amazon.", "meta.", …) and its
//     version suffix ("-v1:0", "-v2") are dropped;
//   - a dated snapshot is its family: "-2024-07-18" (OpenAI),
//     "-20241022" and "@20241022" (Anthropic, Vertex AI), "-latest", and
//     Gemini's "-001" revisions.
//
// Nothing else is stripped: "o1-pro" is not "o1", and "gpt-4o-mini" is
// not "gpt-4o" — a family is never cheaper than the model it names.
func ModelFamily(model string) string {
	m := model
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if rest, ok := strings.CutPrefix(m, "ft:"); ok {
		if i := strings.IndexByte(rest, ':'); i >= 0 {
			rest = rest[:i]
		}
		if rest != "" {
			m = rest
		}
	}
	m = bedrockFamily(m)
	if i := strings.IndexByte(m, '@'); i > 0 {
		m = m[:i]
	}
	for {
		next := stripSnapshot(m)
		if next == m || next == "" {
			return m
		}
		m = next
	}
}

// bedrockVendors are the model vendors Bedrock prefixes its ids with.
var bedrockVendors = []string{"anthropic.", "amazon.", "meta.", "mistral.", "cohere.", "ai21.", "deepseek.", "openai.", "writer.", "qwen."}

// bedrockRegions are the cross-region prefixes of Bedrock's inference
// profile ids.
var bedrockRegions = []string{"us.", "eu.", "apac.", "global.", "us-gov."}

// bedrockFamily drops Bedrock's region and vendor prefixes and its
// version suffix from a model id.
func bedrockFamily(m string) string {
	if strings.IndexByte(m, '.') < 0 {
		// Every prefix ends in a dot (TestBedrockPrefixesEndInADot): a
		// name without one, as most are, has none. The family of a
		// request's model is found several times per request.
		return m
	}
	vendor := false
	for _, region := range bedrockRegions {
		if rest, ok := strings.CutPrefix(m, region); ok {
			m = rest
			break
		}
	}
	for _, v := range bedrockVendors {
		if rest, ok := strings.CutPrefix(m, v); ok {
			m, vendor = rest, true
			break
		}
	}
	if !vendor {
		return m
	}
	// "-v1:0", "-v2:0", "-v1".
	if i := strings.LastIndex(m, "-v"); i > 0 {
		tail := m[i+2:]
		if j := strings.IndexByte(tail, ':'); j >= 0 {
			tail = tail[:j]
		}
		if tail != "" && allDigits(tail) {
			m = m[:i]
		}
	}
	return m
}

// stripSnapshot drops one snapshot suffix from m, or returns m.
func stripSnapshot(m string) string {
	if rest, ok := strings.CutSuffix(m, "-latest"); ok {
		return rest
	}
	i := strings.LastIndexByte(m, '-')
	if i <= 0 {
		return m
	}
	tail := m[i+1:]
	switch {
	case len(tail) == 8 && allDigits(tail) && tail[0] == '2': // -20241022
		return m[:i]
	case len(tail) == 3 && allDigits(tail): // Gemini's -001
		return m[:i]
	case len(tail) == 2 && allDigits(tail):
		// The day of -2024-07-18: the whole date goes.
		if len(m) >= 11 && m[i-3] == '-' && allDigits(m[i-2:i]) && m[i-8] == '-' && allDigits(m[i-7:i-3]) && m[i-7] == '2' {
			return m[:i-8]
		}
	}
	return m
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
