package llm

// BytesPerObservedToken is the rate at which output that cannot be read
// as text is counted: a truncated event (too large to keep) or a cut JSON
// body. Four bytes a token is what generated text averages; JSON
// punctuation around it only makes the count higher.
const BytesPerObservedToken = 4

// ObservedTokens counts n bytes of output that could not be read as text,
// rounding up: a byte seen is never free.
func ObservedTokens(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n + BytesPerObservedToken - 1) / BytesPerObservedToken
}
