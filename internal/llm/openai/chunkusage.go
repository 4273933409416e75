package openai

import (
	"github.com/tokenwarden/tokenwarden/accounting"
)

// usageSpans are the raw values of the members of a usage object that
// readUsageRaw reads, nil for those absent.
type usageSpans struct {
	seen                      usageSlot
	input, output             []byte
	cached, audioIn, audioOut []byte
}

// usage is readUsageRaw's reading of the object: present, it holds a
// prompt or completion count that is not null; readable, as readUsageRaw
// reports it.
func (u *usageSpans) usage() (usage accounting.Usage, present, readable bool) {
	var out accounting.Usage
	for i, c := range [...]struct {
		v   []byte
		dst *int64
	}{
		{u.input, &out.InputTokens},
		{u.output, &out.OutputTokens},
		{u.cached, &out.CachedInputTokens},
		{u.audioIn, &out.AudioInputTokens},
		{u.audioOut, &out.AudioOutputTokens},
	} {
		if c.v == nil {
			continue
		}
		n, set, ok := readCountRaw(c.v)
		if !ok {
			return accounting.Usage{}, false, false
		}
		*c.dst = n
		present = present || set && i < 2
	}
	return out.Clamp(), present, true
}

// note notes a member of slot, and reports false for a second one: a
// usage object that repeats a member is unreadable, and left to
// scanEvent (and gjson) to say so.
func (u *usageSpans) note(slot usageSlot) bool {
	if u.seen&slot != 0 {
		return false
	}
	u.seen |= slot
	return true
}

// chunkUsage reads a usage object as readUsageRaw does: it notes the
// value of each member readUsageRaw reads, and declines (sets bad) an
// object that repeats one, under either of its names.
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
				c.bad = !u.note(usageIn) || !c.countValue(&u.input)
				continue
			}
			if c.lit2(`"prompt_`, `tokens_d`) {
				c.bad = !c.lit(`etails":`) || !u.note(usageInDetails) || !chunkDetails(c, &u.cached, &u.audioIn)
				continue
			}
		case 'i':
			if c.lit2(`"input_t`, `okens":`) {
				c.bad = !u.note(usageIn) || !c.countValue(&u.input)
				continue
			}
			if c.lit2(`"input_t`, `okens_de`) {
				c.bad = !c.lit(`tails":`) || !u.note(usageInDetails) || !chunkDetails(c, &u.cached, &u.audioIn)
				continue
			}
		case 'c':
			if c.lit2(`"complet`, `ion_toke`) {
				switch {
				case c.lit(`ns":`):
					c.bad = !u.note(usageOut) || !c.countValue(&u.output)
				case c.lit2(`ns_detai`, `ls":`):
					c.bad = !u.note(usageOutDetails) || !chunkDetails(c, nil, &u.audioOut)
				default:
					c.bad = true
				}
				continue
			}
		case 'o':
			if c.lit2(`"output_`, `tokens":`) {
				c.bad = !u.note(usageOut) || !c.countValue(&u.output)
				continue
			}
			if c.lit2(`"output_`, `tokens_d`) {
				c.bad = !c.lit(`etails":`) || !u.note(usageOutDetails) || !chunkDetails(c, nil, &u.audioOut)
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

// countValue reads a value that is a count (or not: usageSpans.usage
// judges it), noting it in *v.
func (c *chunkScan) countValue(v *[]byte) bool {
	start := c.i
	if !c.skip() {
		return false
	}
	*v = c.b[start:c.i]
	return true
}

// chunkDetails reads a details object (or null), of whose members
// readUsageRaw reads "cached_tokens" (into *cached, unless it is nil)
// and "audio_tokens"; it declines one that repeats either, or a value
// that is neither an object nor null.
func chunkDetails(c *chunkScan, cached, audio *[]byte) bool {
	if c.lit("null") {
		return true
	}
	if !c.open('{') {
		return false
	}
	for more := c.first('}'); more; more = c.next('}') {
		switch c.b[c.i+1] {
		case 'c':
			if c.lit2(`"cached_`, `tokens":`) {
				if cached != nil {
					c.bad = *cached != nil || !c.countValue(cached)
				} else {
					c.bad = !c.skip()
				}
				continue
			}
		case 'a':
			if c.lit2(`"audio_t`, `okens":`) {
				c.bad = *audio != nil || !c.countValue(audio)
				continue
			}
			if c.lit2(`"accepte`, `d_predic`) {
				c.bad = !c.lit2(`tion_tok`, `ens":`) || !c.skip()
				continue
			}
		case 'r':
			// The counts OpenAI sends beside those readUsageRaw reads,
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
