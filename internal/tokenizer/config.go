package tokenizer

import (
	"errors"
	"fmt"
	"math"
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

// validate reports the first invalid field, named as in Config.
func (c *Config) validate() error {
	if err := validMode(c.Mode); err != nil {
		return fmt.Errorf("Mode: %w", err)
	}
	if err := validRate(c.CharsPerToken); err != nil {
		return fmt.Errorf("CharsPerToken: %w", err)
	}
	for i, r := range c.PerModel {
		if r.Pattern == "" {
			return fmt.Errorf("PerModel[%d].Pattern: empty", i)
		}
		if err := validMode(r.Mode); err != nil {
			return fmt.Errorf("PerModel[%d].Mode: %w", i, err)
		}
		if err := validRate(r.CharsPerToken); err != nil {
			return fmt.Errorf("PerModel[%d].CharsPerToken: %w", i, err)
		}
	}
	if c.DefaultImageWidth < 0 || c.DefaultImageHeight < 0 {
		return errors.New("DefaultImageWidth, DefaultImageHeight: negative")
	}
	if (c.DefaultImageWidth == 0) != (c.DefaultImageHeight == 0) {
		return errors.New("DefaultImageWidth, DefaultImageHeight: set both or neither")
	}
	return nil
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

// matchGlob reports whether name matches pattern, where '*' matches any
// run of characters; both are compared case-insensitively (ASCII).
func matchGlob(pattern, name string) bool {
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
