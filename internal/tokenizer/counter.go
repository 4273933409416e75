package tokenizer

// Counter counts tokens per model as its Config says. It is immutable and
// safe for concurrent use.
type Counter struct {
	cfg Config
	// The profiles, by name (see ForModel).
	o200k, cl100k, generic *profile
}

// Default returns the Counter of the zero Config: the calibrated
// approximation for every model. It is what a caller that configures
// nothing counts with.
func Default() *Counter { return defaultCounter }

// defaultCounter is built when the program starts: the zero Config is
// valid and the tables are compiled in, so only a broken build fails
// here, at start, never while serving.
var defaultCounter = func() *Counter {
	c, err := New(Config{})
	if err != nil {
		panic("tokenizer: the default counter: " + err.Error())
	}
	return c
}()

// New validates cfg and returns its Counter. Exact encodings are loaded
// on first use, not here.
func New(cfg Config) (*Counter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ps, err := profiles()
	if err != nil {
		return nil, err
	}
	cfg.PerModel = append([]Rule(nil), cfg.PerModel...)
	return &Counter{cfg: cfg, o200k: ps[profileO200k], cl100k: ps[profileCl100k], generic: ps[profileGeneric]}, nil
}

// Method says how a model's text is counted, for reports such as
// "tokenwarden estimate".
type Method struct {
	// Mode is the mode in effect for the model.
	Mode Mode
	// Encoding is the exact encoding used, or "" when approximating.
	Encoding string
	// Profile is the approximation's table: "o200k", "cl100k" or
	// "generic" (tokenizer not public: the larger of the two).
	Profile string
	// Scale is the approximation's multiplier (ReferenceCharsPerToken
	// over the CharsPerToken in effect).
	Scale float64
	// Rule is the index of the PerModel rule that matched, or -1.
	Rule int
}

// Method returns how c counts model's text.
func (c *Counter) Method(model string) Method {
	m := Method{Mode: c.cfg.Mode, Rule: -1}
	cpt := c.cfg.CharsPerToken
	for i, r := range c.cfg.PerModel {
		if MatchModel(r.Pattern, model) {
			m.Rule = i
			if r.Mode != "" {
				m.Mode = r.Mode
			}
			if r.CharsPerToken != 0 {
				cpt = r.CharsPerToken
			}
			break
		}
	}
	if m.Mode == "" {
		m.Mode = ModeApproximate
	}
	if cpt == 0 {
		cpt = ReferenceCharsPerToken
	}
	m.Scale = ReferenceCharsPerToken / cpt
	enc := EncodingForModel(model)
	switch enc {
	case O200kBase:
		m.Profile = profileO200k
	case Cl100kBase:
		m.Profile = profileCl100k
	default:
		m.Profile = profileGeneric
	}
	if m.Mode == ModeExact {
		m.Encoding = enc
	}
	return m
}

// CountTokens estimates the tokens of text for model.
func (c *Counter) CountTokens(model, text string) int64 {
	return c.ForModel(model).CountTokens(text)
}

// ForModel returns the counter of one model's text. A request's parse
// counts many strings (every message, every part) for one model; deciding
// how that model is counted once, rather than for each string, is a good
// part of the cost of counting short ones.
func (c *Counter) ForModel(model string) ModelCounter {
	m := c.Method(model)
	// A switch over the three names, rather than a map, which would
	// hash the name for every request.
	p := c.generic
	switch m.Profile {
	case profileO200k:
		p = c.o200k
	case profileCl100k:
		p = c.cl100k
	}
	return ModelCounter{c: c, profile: p, encoding: m.Encoding, scale: m.Scale}
}

// ModelCounter counts the text of one model, as [Counter.CountTokens]
// does for it. Its zero value is not usable; it is a small value, made
// per request by [Counter.ForModel] without allocating.
type ModelCounter struct {
	c        *Counter
	profile  *profile
	encoding string
	scale    float64
}

// CountTokens estimates the tokens of text.
func (mc ModelCounter) CountTokens(text string) int64 {
	if mc.encoding != "" && (mc.c.cfg.ExactMaxBytes < 0 || len(text) <= mc.c.exactMax()) {
		if n, ok := exactCount(mc.encoding, text, mc.profile); ok {
			return n
		}
	}
	return mc.profile.tokens(text, mc.scale)
}

func (c *Counter) exactMax() int {
	if c.cfg.ExactMaxBytes == 0 {
		return DefaultExactMaxBytes
	}
	return c.cfg.ExactMaxBytes
}

// ImageTokens returns what an image costs the model, like the package's
// ImageTokens, but sizes an unsized image by the Config's default.
func (c *Counter) ImageTokens(model, detail string, width, height int) int64 {
	if (width <= 0 || height <= 0) && c.cfg.DefaultImageWidth > 0 {
		width, height = c.cfg.DefaultImageWidth, c.cfg.DefaultImageHeight
	}
	return ImageTokens(model, detail, width, height)
}
