package openai

// The Responses API's fast path. Most events of a Responses stream are
// output text deltas, in the one shape OpenAI sends:
//
//	{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_…",
//	 "output_index":0,"content_index":0,"delta":"…","logprobs":[],"obfuscation":"…"}
//
// scanTextDelta reads such an event with the chunk fast path's cursor,
// comparing the bytes between its values with that shape and finding
// where each value ends; scanEvent reads any other event. In that shape
// the only members scanEvent acts on are the type, which is not "error",
// and the delta, whose text responsesDeltaRaw counts: scanTextDelta
// counts it the same way. TestTextDeltaMutations and FuzzTextDeltaPaths
// hold it to scanEvent's and gjson's reading.

// scanTextDelta counts the text of an output text delta in OpenAI's
// shape, and reports false, having changed nothing, for any other event.
func (r *StreamReader) scanTextDelta(data []byte) bool {
	c := chunkScan{b: data}
	if !c.exactTextDelta() {
		return false
	}
	for _, t := range c.texts[:c.n] {
		r.countValue(t)
	}
	return true
}

// exactTextDelta reads an output text delta in OpenAI's shape.
func (c *chunkScan) exactTextDelta() bool {
	c.depth = 1
	ok := c.lit(`{"type":"response.output_text.delta","sequence_number":`) && c.atDigit() && c.digits() &&
		c.lit(`,"item_id":`) && c.str() &&
		c.lit(`,"output_index":`) && c.atDigit() && c.digits() &&
		c.lit(`,"content_index":`) && c.atDigit() && c.digits() &&
		c.lit(`,"delta":`) && c.at('"') && c.text() &&
		(!c.lit(`,"logprobs":`) || c.skip()) &&
		(!c.lit(`,"obfuscation":`) || c.str()) &&
		c.lit("}")
	return ok && !c.bad && c.i == len(c.b)
}
