package accounting

// MaxTokens is the largest token count tokenwarden books: 2^53, the
// largest integer a float64 (and so a Lua number in the Redis scripts, a
// Prometheus sample, a JSON number) holds exactly. Every count that comes
// from outside — a provider's usage report, an estimate — is clamped to
// 0..MaxTokens before it is added to anything, so that no sum can
// overflow: an upstream that reports "prompt_tokens": 1e30 is charged
// MaxTokens, not a negative number.
const MaxTokens = 1 << 53

// ClampTokens returns n within 0..MaxTokens.
func ClampTokens(n int64) int64 {
	return min(max(n, 0), MaxTokens)
}

// addTokens adds two clamped counts without overflow (the sum of two
// values up to 2^53 fits an int64) and clamps the result.
func addTokens(a, b int64) int64 {
	return ClampTokens(ClampTokens(a) + ClampTokens(b))
}

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
	// AudioInputTokens is the part of InputTokens that is audio (OpenAI's
	// prompt_tokens_details.audio_tokens, Gemini's AUDIO modality), not
	// read from a cache, billed at the audio input rate.
	AudioInputTokens int64
	// OutputTokens is all output, reasoning included, across all choices.
	OutputTokens int64
	// AudioOutputTokens and ImageOutputTokens are the parts of
	// OutputTokens that are audio and images, billed at their own rates.
	AudioOutputTokens int64
	ImageOutputTokens int64
}

// Clamp returns u with every count within 0..MaxTokens and the parts of
// the input (cached reads, cache writes, audio) and of the output (audio,
// images) no larger than what they are part of, taken in that order, so
// that no price is computed on a negative remainder.
func (u Usage) Clamp() Usage {
	in := ClampTokens(u.InputTokens)
	cached := min(ClampTokens(u.CachedInputTokens), in)
	w5 := min(ClampTokens(u.CacheWriteTokens), in-cached)
	w1h := min(ClampTokens(u.CacheWrite1hTokens), in-cached-w5)
	audioIn := min(ClampTokens(u.AudioInputTokens), in-cached-w5-w1h)
	out := ClampTokens(u.OutputTokens)
	audioOut := min(ClampTokens(u.AudioOutputTokens), out)
	return Usage{
		InputTokens:        in,
		CachedInputTokens:  cached,
		CacheWriteTokens:   w5,
		CacheWrite1hTokens: w1h,
		AudioInputTokens:   audioIn,
		OutputTokens:       out,
		AudioOutputTokens:  audioOut,
		ImageOutputTokens:  min(ClampTokens(u.ImageOutputTokens), out-audioOut),
	}
}

// Total is the usage counted on the tokens dimension, saturating at
// MaxTokens.
func (u Usage) Total() int64 { return addTokens(u.InputTokens, u.OutputTokens) }

// Estimate is what a request is expected to cost before it is sent.
type Estimate struct {
	// InputTokens is counted from the request body.
	InputTokens int64
	// OutputTokens is the output cap times the number of choices.
	OutputTokens int64
}

// Clamp returns e with both counts within 0..MaxTokens.
func (e Estimate) Clamp() Estimate {
	return Estimate{InputTokens: ClampTokens(e.InputTokens), OutputTokens: ClampTokens(e.OutputTokens)}
}

// Within returns u clamped (see [Usage.Clamp]) with its input and its
// output no larger than bound's, and reports whether either was larger:
// a report beyond what the request could have produced is charged at
// that bound. The parts of each (cached reads, audio, …) shrink with
// what they are part of.
func (u Usage) Within(bound Usage) (Usage, bool) {
	c := u.Clamp()
	b := bound.Clamp()
	beyond := c.InputTokens > b.InputTokens || c.OutputTokens > b.OutputTokens
	c.InputTokens = min(c.InputTokens, b.InputTokens)
	c.OutputTokens = min(c.OutputTokens, b.OutputTokens)
	return c.Clamp(), beyond
}

// Total is the estimate on the tokens dimension, saturating at MaxTokens.
func (e Estimate) Total() int64 { return addTokens(e.InputTokens, e.OutputTokens) }
