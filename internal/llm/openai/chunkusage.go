package openai

import (
	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// first of each count it holds.
type usageSpans struct {
	ok                        bool // a prompt or completion count was seen
	input, output             []byte
	cached, audioIn, audioOut []byte
}

// usage is parseUsageRaw's reading of the object.
func (u *usageSpans) usage() accounting.Usage {
	return accounting.Usage{
		InputTokens:       llm.TokenCountRaw(u.input),
		CachedInputTokens: llm.TokenCountRaw(u.cached),
		AudioInputTokens:  llm.TokenCountRaw(u.audioIn),
		OutputTokens:      llm.TokenCountRaw(u.output),
		AudioOutputTokens: llm.TokenCountRaw(u.audioOut),
	}.Clamp()
}

// chunkUsage reads a usage object as parseUsageRaw does: each member of
// one of the names it reads, repeated or not, overrides what the last
// one of its kind set.
func chunkUsage(c *chunkScan) bool {
	if !c.open('{') {
		return false
	}
	u := &c.u
	for more := c.first('}'); more; more = c.next('}') {
		start := c.i
		switch c.b[c.i+1] {
		case 'p':
			if c.lit2(`"prompt_`, `tokens":`) {
				c.bad = !c.countValue(&u.input)
				u.ok = true
				continue
			}
			if c.lit2(`"prompt_`, `tokens_d`) {
				c.bad = !c.lit(`etails":`) || !chunkDetails(c, &u.cached, &u.audioIn)
				continue
			}
		case 'i':
			if c.lit2(`"input_t`, `okens":`) {
				c.bad = !c.countValue(&u.input)
				u.ok = true
				continue
			}
			if c.lit2(`"input_t`, `okens_de`) {
				c.bad = !c.lit(`tails":`) || !chunkDetails(c, &u.cached, &u.audioIn)
				continue
			}
		case 'c':
			if c.lit2(`"complet`, `ion_toke`) {
				switch {
				case c.lit(`ns":`):
					c.bad = !c.countValue(&u.output)
					u.ok = true
				case c.lit2(`ns_detai`, `ls":`):
					c.bad = !chunkDetails(c, nil, &u.audioOut)
				default:
					c.bad = true
				}
				continue
			}
		case 'o':
			if c.lit2(`"output_`, `tokens":`) {
				c.bad = !c.countValue(&u.output)
				u.ok = true
				continue
			}
			if c.lit2(`"output_`, `tokens_d`) {
				c.bad = !c.lit(`etails":`) || !chunkDetails(c, nil, &u.audioOut)
				continue
			}
		}
		if c.lit2(`"total_t`, `okens":`) {
			c.bad = !c.skip()
			continue
		}
		c.i = start
		c.bad = !c.otherKey("prompt_tokens", "input_tokens", "completion_tokens", "output_tokens",
			"prompt_tokens_details", "input_tokens_details", "completion_tokens_details", "output_tokens_details") || !c.skip()
	}
	return !c.bad
}

// countValue reads a value that is a count (or not: TokenCountRaw
// reads any value), noting it in *v.
func (c *chunkScan) countValue(v *[]byte) bool {
	start := c.i
	if !c.skip() {
		return false
	}
	*v = c.b[start:c.i]
	return true
}

// chunkDetails reads a details object, of whose members parseUsageRaw
// reads the first "cached_tokens" (into *cached, unless it is nil) and
// the first "audio_tokens": a details object replaces what an earlier
// one set, and one that is not an object sets nothing.
func chunkDetails(c *chunkScan, cached, audio *[]byte) bool {
	if cached != nil {
		*cached = nil
	}
	*audio = nil
	if !c.at('{') {
		return c.skip()
	}
	c.open('{')
	for more := c.first('}'); more; more = c.next('}') {
		switch c.b[c.i+1] {
		case 'c':
			if c.lit2(`"cached_`, `tokens":`) {
				if cached != nil && *cached == nil {
					c.bad = !c.countValue(cached)
				} else {
					c.bad = !c.skip()
				}
				continue
			}
		case 'a':
			if c.lit2(`"audio_t`, `okens":`) {
				if *audio == nil {
					c.bad = !c.countValue(audio)
				} else {
					c.bad = !c.skip()
				}
				continue
			}
			if c.lit2(`"accepte`, `d_predic`) {
				c.bad = !c.lit2(`tion_tok`, `ens":`) || !c.skip()
				continue
			}
		case 'r':
			// The counts OpenAI sends beside those parseUsageRaw reads,
			// known by their bytes: cheaper than otherKey.
			if c.lit2(`"reasoni`, `ng_token`) {
				c.bad = !c.lit(`s":`) || !c.skip()
				continue
			}
			if c.lit2(`"rejecte`, `d_predic`) {
				c.bad = !c.lit2(`tion_tok`, `ens":`) || !c.skip()
				continue
			}
		}
		c.bad = !c.otherKey("cached_tokens", "audio_tokens") || !c.skip()
	}
	return !c.bad
}
