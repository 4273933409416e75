package tokenizer

import (
	"errors"
	"fmt"
	"math"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Mode selects how a model's text is counted.
type Mode string

// Modes.
const (
	// ModeApproximate estimates from the text's bytes with a learned table:
	// gigabytes per second, a few percent high on typical text.
	ModeApproximate Mode = "approximate"
	// ModeExact runs the model's real BPE tokenizer where one is public
	// (OpenAI's o200k_base and cl100k_base): a few megabytes per second.
	// Models without one, and text the tokenizer cannot handle in bounded
	// time, fall back to the approximation.
	ModeExact Mode = "exact"
)

// ReferenceCharsPerToken is the CharsPerToken at which the approximation
// counts as calibrated. CharsPerToken scales the whole estimate by
// ReferenceCharsPerToken / CharsPerToken, whatever the script.
const ReferenceCharsPerToken = 4

// DefaultExactMaxBytes is the longest text counted exactly when
// Config.ExactMaxBytes is zero: 50–90 ms of tokenizer work.
const DefaultExactMaxBytes = 128 << 10

// Config configures a Counter; the zero value approximates every model.
type Config struct {
	// Mode is the default mode; empty means ModeApproximate.
	Mode Mode
	// CharsPerToken scales the approximation for models without a rule
	// of their own: ReferenceCharsPerToken (4, also for zero) is the
	// calibrated estimate, 3 counts a third more tokens. The
	// approximation is script-aware, so this is a scale, not a literal
	// rate: at 4, Chinese still costs about one token per character.
	CharsPerToken float64
	// PerModel rules override Mode and CharsPerToken for the models they
	// match; the first matching rule wins.
	PerModel []Rule
	// ExactMaxBytes bounds the text counted exactly: a longer text is
	// approximated, since the exact tokenizer costs 0.4–0.7 ms per
	// kilobyte. Zero means DefaultExactMaxBytes; negative means no bound.
	ExactMaxBytes int
	// DefaultImageWidth and DefaultImageHeight size an image whose size
	// the request does not tell (an image URL). Zero means the worst
	// case for the model: an unsized image is never charged less than it
	// may cost.
	DefaultImageWidth, DefaultImageHeight int
}

// Rule sets the mode and rate for the models whose names match Pattern.
type Rule struct {
	// Pattern matches model names, case-insensitively; '*' matches any
	// run of characters (slashes too), e.g. "claude-*" or "*/llama-3*".
	Pattern string
	// Mode for the matching models; empty means the Config's.
	Mode Mode
	// CharsPerToken for the matching models; zero means the Config's.
	CharsPerToken float64
}

// validate reports every invalid field, joined, each an
// accounting.FieldError named by its key under estimation in the config
// file (tokenizer, per_model[1].chars_per_token, default_image, …).
func (c *Config) validate() error {
	var errs []error
	bad := func(field string, err error) {
		if err != nil {
			errs = append(errs, &accounting.FieldError{Field: field, Err: err})
		}
	}
	bad("tokenizer", validMode(c.Mode))
	bad("chars_per_token", validRate(c.CharsPerToken))
	for i, r := range c.PerModel {
		field := fmt.Sprintf("per_model[%d]", i)
		if r.Pattern == "" {
			bad(field+".pattern", errors.New("required"))
		}
		bad(field+".tokenizer", validMode(r.Mode))
		bad(field+".chars_per_token", validRate(r.CharsPerToken))
	}
	if c.DefaultImageWidth < 0 {
		bad("default_image.width", errors.New("must not be negative"))
	}
	if c.DefaultImageHeight < 0 {
		bad("default_image.height", errors.New("must not be negative"))
	}
	if (c.DefaultImageWidth == 0) != (c.DefaultImageHeight == 0) {
		bad("default_image", errors.New("set both width and height, or neither"))
	}
	return errors.Join(errs...)
}

func validMode(m Mode) error {
	switch m {
	case "", ModeApproximate, ModeExact:
		return nil
	}
	return fmt.Errorf("%q is not %q or %q", m, ModeApproximate, ModeExact)
}

// validRate accepts zero (inherit) and rates a tokenizer could have.
func validRate(r float64) error {
	if r == 0 {
		return nil
	}
	if math.IsNaN(r) || r < 0.5 || r > 20 {
		return fmt.Errorf("%v is outside 0.5..20", r)
	}
	return nil
}

// MatchModel reports whether a model name matches a pattern of the config
// (estimation.per_model, settlement.hidden_reasoning_models): '*' matches any
// run of characters; both are compared case-insensitively (ASCII).
func MatchModel(pattern, name string) bool {
	// The classic two-pointer walk: linear in practice, and no recursion
	// for a model name that an attacker chose.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && lower(pattern[p]) == lower(name[n]):
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
