package llm

import "github.com/tokenwarden/tokenwarden/internal/tokenizer"

// Counter is the one seam through which the wire formats count tokens:
// a request's text and images, and the output seen in a response. The
// server runs *tokenizer.Counter, configured from estimation; tests pass
// simpler counters to get round figures.
type Counter interface {
	// CountTokens estimates the tokens of text for model. It should
	// rather count a little too many than too few: an estimate that is
	// too low lets concurrent requests overshoot a limit.
	CountTokens(model, text string) int64
	// ImageTokens prices an image of the given size (≤ 0 when unknown)
	// by model's formula.
	ImageTokens(model, detail string, width, height int) int64
}

var _ Counter = (*tokenizer.Counter)(nil)

// counterOr returns c, or the calibrated default when the caller set
// none: one default for every format, the same the server starts with.
func counterOr(c Counter) Counter {
	if c == nil {
		return tokenizer.Default()
	}
	return c
}

// TextCounter counts the text of one request for its model. A parse
// counts many strings for one model, and the server's counter decides
// how a model is counted (its rules, its encoding, its profile) once
// here rather than for every string.
type TextCounter struct {
	counter Counter
	model   string
	// resolved is the server's counter, decided for the model; counter
	// is nil when it is set.
	resolved tokenizer.ModelCounter
}

// NewTextCounter returns the counter of model's text by c, or by the
// calibrated default when c is nil.
func NewTextCounter(c Counter, model string) TextCounter {
	c = counterOr(c)
	if tc, ok := c.(*tokenizer.Counter); ok {
		return TextCounter{resolved: tc.ForModel(model)}
	}
	return TextCounter{counter: c, model: model}
}

// Count estimates the tokens of s, as Counter.CountTokens does.
func (t *TextCounter) Count(s string) int64 {
	if t.counter == nil {
		return t.resolved.CountTokens(s)
	}
	return t.counter.CountTokens(t.model, s)
}
