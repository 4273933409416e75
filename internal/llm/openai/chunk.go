package openai

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
//
// It is the general fast path (scanEvent) specialised: it accepts a
// subset of what scanEvent accepts, and reads it as scanEvent does. Any
// event it cannot prove it reads that way goes to scanEvent instead:
// whitespace between tokens, a key with an escape, a member that the
// reader acts on appearing twice where scanEvent would keep one of them,
// an "object" other than "chat.completion.chunk", members scanEvent acts
// on that a chunk does not carry (error, type, delta, response, x_groq),
// values of a kind the reader does not expect (choices that are not an
// array of objects, a delta or function that is not an object), or more
// texts than it keeps track of. FuzzChunkPaths holds exact and members
// to the same reading, and both to scanEvent's and gjson's, on every
// input. The cursor they read with is in chunkscan.go, the usage object
// in chunkusage.go.

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
	// Most chunks have no usage object, or one without counts: their
	// usage is not read (seen notes a count or details object).
	if c.u.seen != 0 {
		usage, present, readable := c.u.usage()
		if !readable {
			// Left to scanEvent, and gjson, which mark the usage unreadable.
			return false
		}
		if present {
			r.usage, r.hasUsage = usage, true
		}
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
		c.lit(`,"object":"chat.completion.chunk","created":`) && c.atDigit() && c.digits() &&
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
		ok := c.lit(`{"index":`) && c.atDigit() && c.digits() &&
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
					// readUsageRaw reads nothing but an object.
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

// usageSpans are the values of a usage object that readUsageRaw reads
