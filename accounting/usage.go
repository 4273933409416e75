package accounting

// Usage is what a request consumed, in one shape for every API. Each
// API's extractor maps its provider's fields onto it.
type Usage struct {
	// InputTokens is all input, including cached reads and cache writes.
	InputTokens int64
	// CachedInputTokens is the part of InputTokens read from the
	// provider's prompt cache (billed at the cached rate).
	CachedInputTokens int64
	// CacheWriteTokens is the part of InputTokens written to a prompt
	// cache with a short (5 minute) lifetime; CacheWrite1hTokens with a
	// one hour lifetime.
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	// OutputTokens is all output, reasoning included, across all choices.
	OutputTokens int64
}

// Total is the usage counted on the tokens dimension.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Estimate is what a request is expected to cost before it is sent.
type Estimate struct {
	// InputTokens is counted from the request body.
	InputTokens int64
	// OutputTokens is the output cap times the number of choices.
	OutputTokens int64
}

// Total is the estimate on the tokens dimension.
func (e Estimate) Total() int64 { return e.InputTokens + e.OutputTokens }
