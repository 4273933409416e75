package accounting

import (
	"cmp"
	"errors"
	"math"
)

// Price is a model's price in USD per million tokens. Because a token
// count times a price per million is a cost in micro-dollars, prices need
// no scaling.
type Price struct {
	Input       float64
	CachedInput float64 // zero means Input
	// CacheWrite prices 5-minute cache writes; zero means 1.25 × Input.
	CacheWrite float64
	// CacheWrite1h prices 1-hour cache writes; zero means 2 × Input.
	CacheWrite1h float64
	// AudioInput prices audio input; zero means Input.
	AudioInput float64
	Output     float64
	// AudioOutput and ImageOutput price audio and image output; zero
	// means Output.
	AudioOutput float64
	ImageOutput float64
}

// Validate reports every price that is negative or not a number, joined;
// each is a [FieldError] named by its config key (input, cached_input,
// cache_write, cache_write_1h, audio_input, output, audio_output,
// image_output).
func (pr *Price) Validate() error {
	var errs []error
	for _, f := range []struct {
		name  string
		value float64
	}{
		{"input", pr.Input}, {"cached_input", pr.CachedInput}, {"cache_write", pr.CacheWrite},
		{"cache_write_1h", pr.CacheWrite1h}, {"audio_input", pr.AudioInput}, {"output", pr.Output},
		{"audio_output", pr.AudioOutput}, {"image_output", pr.ImageOutput},
	} {
		if f.value < 0 || math.IsNaN(f.value) || math.IsInf(f.value, 0) {
			errs = append(errs, FieldErrorf(f.name, "%v is not a price", f.value))
		}
	}
	return errors.Join(errs...)
}

// Prices maps model names to prices. The entry "default" applies to
// models without one of their own.
type Prices map[string]Price

// DefaultModel is the Prices key used for models not listed.
const DefaultModel = "default"

// Lookup returns the model's price: its own entry, else its family's
// ([ModelFamily]: a dated snapshot, a Bedrock or Vertex spelling, a
// fine-tune's base), else the longest pattern's that matches, else the
// default entry (see [Prices.Resolve]).
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	key, how := p.Resolve(model)
	return p[key], how != NoPrice
}

// Scale returns the price multiplied by f; f ≤ 0 (unset) or NaN leaves
// it as it is. Derived rates (cache writes at 1.25× and 2× input) scale
// with input.
func (pr Price) Scale(f float64) Price {
	if !(f > 0) || f == 1 {
		return pr
	}
	return Price{Input: pr.Input * f, CachedInput: pr.CachedInput * f, CacheWrite: pr.CacheWrite * f,
		CacheWrite1h: pr.CacheWrite1h * f, AudioInput: pr.AudioInput * f, Output: pr.Output * f,
		AudioOutput: pr.AudioOutput * f, ImageOutput: pr.ImageOutput * f}
}

// UsageCost returns the cost of usage in micro-dollars, rounded up.
func (pr Price) UsageCost(u Usage) int64 {
	cached := pr.CachedInput
	if cached == 0 {
		cached = pr.Input
	}
	write := pr.CacheWrite
	if write == 0 {
		write = 1.25 * pr.Input
	}
	write1h := pr.CacheWrite1h
	if write1h == 0 {
		write1h = 2 * pr.Input
	}
	audioIn := cmp.Or(pr.AudioInput, pr.Input)
	audioOut := cmp.Or(pr.AudioOutput, pr.Output)
	imageOut := cmp.Or(pr.ImageOutput, pr.Output)
	plain := max(0, u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens-u.CacheWrite1hTokens-u.AudioInputTokens)
	text := max(0, u.OutputTokens-u.AudioOutputTokens-u.ImageOutputTokens)
	c := float64(plain)*pr.Input +
		float64(u.CachedInputTokens)*cached +
		float64(u.CacheWriteTokens)*write +
		float64(u.CacheWrite1hTokens)*write1h +
		float64(u.AudioInputTokens)*audioIn +
		float64(text)*pr.Output +
		float64(u.AudioOutputTokens)*audioOut +
		float64(u.ImageOutputTokens)*imageOut
	return microCeil(c)
}

// EstimateCost returns the cost of an estimate in micro-dollars, with all
// input at the full input price: a reservation must not count on a cache
// hit it cannot know about. Where audio or image rates are set above the
// text rates, the dearest rate of each side prices it, as the estimate
// cannot tell how much of the request, or of its answer, is audio or
// image: the settlement refunds what the usage shows was text.
func (pr Price) EstimateCost(e Estimate) int64 {
	in := max(pr.Input, pr.AudioInput)
	out := max(pr.Output, pr.AudioOutput, pr.ImageOutput)
	return microCeil(float64(e.InputTokens)*in + float64(e.OutputTokens)*out)
}

// microCeil rounds a cost up to whole micro-dollars, ignoring the
// floating-point noise of the multiplication (0.15 × 1000 is not quite 150).
// It saturates at MaxCost: an absurd token count must price as a huge
// cost, never overflow into a negative one (a refund).
func microCeil(c float64) int64 {
	switch {
	case c <= 0 || math.IsNaN(c):
		return 0
	case c >= MaxCost:
		return MaxCost
	}
	return int64(math.Ceil(c - 1e-6))
}

// MaxCost is the largest cost, in micro-dollars, a reservation or a
// settlement books: 2^53 (about 9 billion USD), the largest integer every
// store holds exactly.
const MaxCost = 1 << 53
