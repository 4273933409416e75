// Package gemini is the wire format of Google's Gemini generateContent API
// (…/models/{model}:generateContent and :streamGenerateContent, on the
// Gemini API and on Vertex AI): request inspection, the maxOutputTokens
// edit, usage extraction and error replies in Google's shape.
//
// The model is named in the path, not the body ([ModelFromPath]), and so is
// streaming. A stream comes in one of two framings: with ?alt=sse it is
// data-only SSE; without, it is one JSON array whose elements arrive as
// the model produces them. Both carry a usageMetadata on many chunks,
// each a cumulative snapshot (early ones may lack the output counts):
// the reader keeps the last one and never adds them up.
//
// Google's JSON parser accepts each proto field under its lowerCamelCase
// name and its snake_case one. The fields this package reads are declared
// under both (request.go), so llm.CheckBody refuses a body that has both
// (generationConfig and generation_config) or either in another case, and
// the maxOutputTokens edit lands in whichever the body uses. A
// generationConfig that is not an object is refused. A thinkingConfig
// marks the request as thinking (billed as output, streamed at most as a
// summary) unless its thinkingBudget is 0.
//
// usageMetadata maps onto accounting.Usage as: input = promptTokenCount
// (which includes cachedContentTokenCount) + toolUsePromptTokenCount;
// cached input = cachedContentTokenCount; output = candidatesTokenCount +
// thoughtsTokenCount (thinking is billed as output and is not part of the
// candidates count).
//
// The array framing and plain JSON bodies are read by a small incremental
// JSON scanner ([Scanner]) that tracks nesting and captures only the
// usageMetadata objects, so a response of any size is read in one pass in
// a few KiB.
package gemini
