package openai

import (
	"bytes"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// The chat chunk fast path. Nearly every event of a chat completion
// stream is a chunk in the one shape OpenAI (and the servers that copy
// it) sends, its members in the same order, without whitespace:
//
//	{"id":"chatcmpl-…","object":"chat.completion.chunk","created":1767225600,
//	 "model":"…","service_tier":"default","system_fingerprint":"fp_…",
//	 "choices":[{"index":0,"delta":{"content":"…"},"logprobs":null,"finish_reason":null}],
//	 "usage":null,"obfuscation":"…"}
//
// scanChunk reads such an event in one pass, and acts on what the reader
// reads (the text of each choice's delta, the usage object) once the
// whole event is known to be well-formed. It first matches the event
// against that shape (exact): the bytes between the values are compared
// as a whole, a value is skipped by finding its end. An event in another
// order, or with other members, is read member by member (members): a
// key is recognised by comparing its bytes with the names it expects, a
// value it does not read is skipped with the scanner's grammar
// (llm.ValueEnd).
// It is the general fast path (scanEvent) specialised: it accepts a
// subset of what scanEvent accepts, and reads it as scanEvent does. Any
// event it cannot prove it reads that way goes to scanEvent instead:
// whitespace between tokens, a key with an escape, a member that the
// reader acts on appearing twice where scanEvent would keep one of them,
// an "object" other than "chat.completion.chunk", members scanEvent acts
// on that a chunk does not carry (error, type, delta, response, x_groq),
// values of a kind the reader does not expect (choices that are not an
// array of objects, a delta or function that is not an object), or more
// texts than it keeps track of. FuzzChunkPaths holds the two to the same
// reading on every input.

// maxChunkTexts bounds the texts scanChunk notes in one event: the texts
// of a chunk are one per choice, or one per tool call.
const maxChunkTexts = 8

// chunkScan is the state of one scanChunk: the event, the position of
// the next byte to read, and what the reader will act on.
type chunkScan struct {
	b     []byte
	i     int
	depth int  // containers open at the position, the event itself included
	bad   bool // the event is not one scanChunk reads
	u     usageSpans
	texts [maxChunkTexts][]byte
	n     int // texts noted
}

// lit reads s if the bytes at the position are s. Comparing with a
// constant of up to 8 bytes compiles to a load or two; a longer one
// calls memequal, which costs more than the rest of reading the key, so
// a longer s is given to lit2 in two parts, or to lit2 and lit in three.
func (c *chunkScan) lit(s string) bool {
	if len(c.b)-c.i >= len(s) && string(c.b[c.i:c.i+len(s)]) == s {
		c.i += len(s)
		return true
	}
	return false
}

// lit2 reads a+b, each of up to 8 bytes, if the bytes at the position
// are a+b: one literal too long for lit, in two parts.
func (c *chunkScan) lit2(a, b string) bool {
	n := len(a) + len(b)
	if len(c.b)-c.i >= n && string(c.b[c.i:c.i+len(a)]) == a && string(c.b[c.i+len(a):c.i+n]) == b {
		c.i += n
		return true
	}
	return false
}

// at reports whether the byte at the position is ch.
func (c *chunkScan) at(ch byte) bool { return c.i < len(c.b) && c.b[c.i] == ch }

// open reads the opening bracket of a container.
func (c *chunkScan) open(bracket byte) bool {
	if !c.at(bracket) {
		return false
	}
	c.i++
	c.depth++
	return true
}

// next reads what follows a member or an element: a comma, before
// another (true), or the container's closing bracket (false). At
// anything else it sets bad. It also sets bad, for an object, when what
// follows the comma is not the start of a key: a caller may look at the
// first letter of the key.
func (c *chunkScan) next(closing byte) bool {
	if c.bad || c.i >= len(c.b) {
		c.bad = true
		return false
	}
	switch c.b[c.i] {
	case ',':
		c.i++
		if closing == '}' && (len(c.b)-c.i < 2 || c.b[c.i] != '"') {
			c.bad = true
			return false
		}
		return true
	case closing:
		c.i++
		c.depth--
		return false
	}
	c.bad = true
	return false
}

// first reads the closing bracket of an empty container (false), or
// reports that a member or element follows (true); for an object, bad is
// set unless a key starts there.
func (c *chunkScan) first(closing byte) bool {
	if c.at(closing) {
		c.i++
		c.depth--
		return false
	}
	if closing == '}' && (len(c.b)-c.i < 2 || c.b[c.i] != '"') {
		c.bad = true
		return false
	}
	return true
}

// skip reads the value at the position, which nothing reads: a string,
// null or a small integer directly, anything else with the scanner. A
// container is skipped within the depth scanEvent's scan allows it: that
// scan skips the value of each top-level member whole, with at most
// llm.MaxScanDepth levels of containers.
func (c *chunkScan) skip() bool {
	if c.i < len(c.b) {
		switch ch := c.b[c.i]; {
		case ch == '"':
			if c.str() {
				return true
			}
		case ch == 'n':
			if c.lit("null") {
				return true
			}
		case ch >= '0' && ch <= '9':
			if c.digits() {
				return true
			}
		}
	}
	end, ok := llm.ValueEnd(c.b, c.i, llm.MaxScanDepth+1-c.depth)
	c.i = end
	return ok
}

// str reads the string at the position when its closing quote is the
// first quote after it and has no backslash before it, and reports
// whether it did: any other string is left to the scanner.
func (c *chunkScan) str() bool {
	if !c.at('"') {
		return false
	}
	k := bytes.IndexByte(c.b[c.i+1:], '"')
	if k < 0 {
		return false
	}
	q := c.i + 1 + k
	if c.b[q-1] == '\\' {
		return false
	}
	c.i = q + 1
	return true
}

// digits reads the non-negative integer without fraction or exponent at
// the position, if a comma or a closing bracket follows it, and reports
// whether it did: any other number is left to the scanner.
func (c *chunkScan) digits() bool {
	i := c.i + 1
	if c.b[c.i] != '0' {
		for i < len(c.b) && c.b[i] >= '0' && c.b[i] <= '9' {
			i++
		}
	}
	if i < len(c.b) && (c.b[i] == ',' || c.b[i] == '}' || c.b[i] == ']') {
		c.i = i
		return true
	}
	return false
}

// text reads a value whose text, if it is a string, the reader counts
// (countValue counts nothing of any other value).
func (c *chunkScan) text() bool {
	if !c.at('"') {
		return c.skip()
	}
	if c.n == maxChunkTexts {
		return false
	}
	start := c.i
	if !c.str() {
		end, ok := llm.ValueEnd(c.b, c.i, 0)
		if !ok {
			return false
		}
		c.i = end
	}
	c.texts[c.n] = c.b[start:c.i]
	c.n++
	return true
}

// otherKey reads the key at the position, one the caller does not know
// by its bytes, with its colon. It refuses a key with an escape (whose
// text could be any name) and a key in names (one the caller acts on,
// here spelled in a way it did not expect).
func (c *chunkScan) otherKey(names ...string) bool {
	if !c.at('"') {
		return false
	}
	end := bytes.IndexByte(c.b[c.i+1:], '"')
	if end < 0 {
		return false
	}
	key := c.b[c.i+1 : c.i+1+end]
	if bytes.IndexByte(key, '\\') >= 0 {
		return false
	}
	for _, name := range names {
		if string(key) == name {
			return false
		}
	}
	c.i += end + 2
	return c.lit(":")
}

// scanChunk is the fast path of onEvent for a chat chunk (see above): it
// reports false, having changed nothing, for an event it leaves to
// scanEvent.
func (r *StreamReader) scanChunk(data []byte) bool {
	c := chunkScan{b: data}
	if !c.exact() {
		c = chunkScan{b: data}
		if !c.members() {
			return false
		}
	}
	if c.u.ok {
		r.usage, r.hasUsage = c.u.usage(), true
	}
	for _, t := range c.texts[:c.n] {
		r.countValue(t)
	}
	return true
}

// exact reads a chunk with OpenAI's members in OpenAI's order, and
// reports whether it did: nearly every chunk is one, and matching the
// bytes between its values as a whole costs a fraction of reading its
// members one by one. Its choices are OpenAI's too, their deltas and the
// usage object are read as members reads them.
func (c *chunkScan) exact() bool {
	c.depth = 1
	ok := c.lit(`{"id":`) && c.str() &&
		c.lit(`,"object":"chat.completion.chunk","created":`) && c.at1to9() && c.digits() &&
		c.lit(`,"model":`) && c.str() &&
		(!c.lit(`,"service_tier":`) || c.str()) &&
		(!c.lit(`,"system_fingerprint":`) || c.lit("null") || c.str()) &&
		c.lit(`,"choices":[`) && c.exactChoices() &&
		(!c.lit(`,"usage":`) || c.lit("null") || chunkUsage(c)) &&
		(!c.lit(`,"obfuscation":`) || c.str()) &&
		c.lit("}")
	return ok && !c.bad && c.i == len(c.b)
}

// exactChoices reads the rest of a choices array after its "[", each
// choice in OpenAI's shape: {"index":0,"delta":{...},"logprobs":null,
// "finish_reason":null} (or a string).
func (c *chunkScan) exactChoices() bool {
	if c.lit("]") {
		return true
	}
	c.depth = 3 // in the array, in the choice
	for {
		ok := c.lit(`{"index":`) && c.at1to9() && c.digits() &&
			c.lit(`,"delta":`) && chunkDelta(c) &&
			c.lit(`,"logprobs":null,"finish_reason":`) && (c.lit("null") || c.str()) &&
			c.lit("}")
		if !ok || c.bad {
			return false
		}
		if c.lit("]") {
			c.depth = 1
			return true
		}
		if !c.lit(",") {
			return false
		}
	}
}

// at1to9 reports whether the position holds a digit (digits reads the
// number that starts with it).
func (c *chunkScan) at1to9() bool { return c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' }

// members reads a chunk member by member, in any order (see above), and
// reports whether it did.
func (c *chunkScan) members() bool {
	if !c.open('{') {
		return false
	}
	// The members the reader acts on may appear once each.
	var hasObject, hasChoices, hasUsage bool
	for more := c.first('}'); more; more = c.next('}') {
		// The keys of a chunk, by their first letter.
		switch c.b[c.i+1] {
		case 'i':
			if c.lit(`"id":`) {
				c.bad = !c.skip()
				continue
			}
		case 'o':
			if c.lit2(`"object"`, `:`) {
				c.bad = hasObject || !c.lit2(`"chat.co`, `mpletion`) || !c.lit(`.chunk"`)
				hasObject = true
				continue
			}
			if c.lit2(`"obfusca`, `tion":`) {
				c.bad = !c.skip()
				continue
			}
		case 'c':
			if c.lit2(`"created`, `":`) {
				c.bad = !c.skip()
				continue
			}
			if c.lit2(`"choices`, `":`) {
				c.bad = hasChoices || !chunkChoices(c)
				hasChoices = true
				continue
			}
		case 'm':
			if c.lit(`"model":`) {
				c.bad = !c.skip()
				continue
			}
		case 's':
			if c.lit2(`"service`, `_tier":`) {
				c.bad = !c.skip()
				continue
			}
			if c.lit2(`"system_`, `fingerpr`) {
				c.bad = !c.lit(`int":`) || !c.skip()
				continue
			}
		case 'u':
			if c.lit(`"usage":`) {
				if c.at('{') {
					c.bad = hasUsage || !chunkUsage(c)
				} else {
					// parseUsageRaw reads nothing but an object.
					c.bad = hasUsage || !c.skip()
				}
				hasUsage = true
				continue
			}
		}
		// Any other member but those scanEvent acts on.
		c.bad = !c.otherKey("usage", "response", "x_groq", "error", "type", "object", "choices", "delta") || !c.skip()
	}
	return !c.bad && c.i == len(c.b)
}

// chunkChoices reads the choices array: of each choice, its first (here:
// only) delta is what chatDeltaRaw reads.
func chunkChoices(c *chunkScan) bool {
	if !c.open('[') {
		return false
	}
	for more := c.first(']'); more; more = c.next(']') {
		if !c.open('{') {
			return false
		}
		hasDelta := false
		for more := c.first('}'); more; more = c.next('}') {
			switch c.b[c.i+1] {
			case 'i':
				if c.lit(`"index":`) {
					c.bad = !c.skip()
					continue
				}
			case 'd':
				if c.lit(`"delta":`) {
					c.bad = hasDelta || !chunkDelta(c)
					hasDelta = true
					continue
				}
			case 'l':
				if c.lit2(`"logprob`, `s":`) {
					c.bad = !c.skip()
					continue
				}
			case 'f':
				if c.lit2(`"finish_`, `reason":`) {
					c.bad = !c.skip()
					continue
				}
			}
			c.bad = !c.otherKey("delta") || !c.skip()
		}
	}
	return !c.bad
}

// chunkDelta reads a delta: every member of one of the names
// chatDeltaRaw reads is read, repeated or not, as it reads them.
func chunkDelta(c *chunkScan) bool {
	if !c.open('{') {
		return false
	}
	for more := c.first('}'); more; more = c.next('}') {
		switch c.b[c.i+1] {
		case 'c':
			if c.lit2(`"content`, `":`) {
				c.bad = !c.text()
				continue
			}
		case 'r':
			if c.lit(`"role":`) {
				c.bad = !c.skip()
				continue
			}
			if c.lit2(`"refusal`, `":`) || c.lit2(`"reasoni`, `ng":`) {
				c.bad = !c.text()
				continue
			}
			if c.lit2(`"reasoni`, `ng_conte`) {
				// Only "reasoning_content" starts so among the names
				// chatDeltaRaw reads.
				c.bad = !c.lit(`nt":`) || !c.text()
				continue
			}
		case 't':
			if c.lit2(`"tool_ca`, `lls":`) {
				c.bad = !c.lit("null") && !chunkToolCalls(c)
				continue
			}
		case 'f':
			if c.lit2(`"functio`, `n_call":`) {
				c.bad = !chunkFunction(c)
				continue
			}
		}
		c.bad = !c.otherKey("content", "reasoning_content", "reasoning", "refusal", "tool_calls", "function_call") || !c.skip()
	}
	return !c.bad
}

// chunkToolCalls reads a delta's tool calls, whose function's arguments
// are text.
func chunkToolCalls(c *chunkScan) bool {
	if !c.open('[') {
		return false
	}
	for more := c.first(']'); more; more = c.next(']') {
		if !c.open('{') {
			return false
		}
		hasFunction := false
		for more := c.first('}'); more; more = c.next('}') {
			switch c.b[c.i+1] {
			case 'i':
				if c.lit(`"index":`) || c.lit(`"id":`) {
					c.bad = !c.skip()
					continue
				}
			case 't':
				if c.lit(`"type":`) {
					c.bad = !c.skip()
					continue
				}
			case 'f':
				if c.lit2(`"functio`, `n":`) {
					c.bad = hasFunction || !chunkFunction(c)
					hasFunction = true
					continue
				}
			}
			c.bad = !c.otherKey("function") || !c.skip()
		}
	}
	return !c.bad
}

// chunkFunction reads a tool call's function or a function_call: an
// object whose one "arguments" is text.
func chunkFunction(c *chunkScan) bool {
	if !c.open('{') {
		return false
	}
	hasArguments := false
	for more := c.first('}'); more; more = c.next('}') {
		switch c.b[c.i+1] {
		case 'n':
			if c.lit(`"name":`) {
				c.bad = !c.skip()
				continue
			}
		case 'a':
			if c.lit2(`"argumen`, `ts":`) {
				c.bad = hasArguments || !c.text()
				hasArguments = true
				continue
			}
		}
		c.bad = !c.otherKey("arguments") || !c.skip()
	}
	return !c.bad
}

// usageSpans are the values of a usage object that parseUsageRaw reads
// (nil for none): the last of each count, and of each details object the
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
