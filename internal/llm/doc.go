// Package llm is the neutral view of an LLM API call that every wire
// format package (openai, anthropic, gemini, bedrock) produces and the
// extproc state machine consumes.
//
// A wire format answers three questions for its API: what a request body
// will cost before the call ([Request], from [API.ParseRequest]), how to
// adjust the body so the cost is bounded and measurable ([API.Inject]),
// and what the response reports it cost ([UsageReader]). It also renders
// tokenwarden's own error replies in the API's error shape, so that each
// vendor's SDK recognises a rate limit as one ([API.RenderError]).
//
// # Reading a request as the provider will
//
// A reservation is only as good as the agreement between what the wire
// format reads and what the provider acts on, and request bodies come
// from clients who may try to make the two differ. So a wire format reads
// nothing before [CheckBody] has accepted the body against the format's
// [Fields] (the fields it reads, at every depth). The body must be one
// JSON object, valid as RFC 8259 and Go's encoding/json define it, in
// valid UTF-8, nested at most [MaxDepth] levels, and:
//
//   - no object has a key twice. Providers keep the last of repeated
//     keys and gjson the first, so {"max_tokens":1, …, "max_tokens":64000}
//     would be reserved as 1 and generated as 64000. Keys compare as
//     providers decode them ("m\u006fdel" is "model") and case-folded as
//     encoding/json folds them, so "max_tokens" and "MAX_TOKENS" are one
//     key too.
//   - no key is a field the format reads in another case ("MAX_TOKENS",
//     "Model", "ſtream" with a long s): OpenAI-compatible servers written
//     in Go read it as the field, Python ones do not, so the request is
//     refused rather than guessed at.
//   - no object has two names of one field (Gemini's generationConfig and
//     generation_config).
//
// The errors say which key, and where (messages[2].content[0]); the state
// machine replies 400 with them in the API's shape. The check is one
// iterative pass that allocates nothing for usual bodies and is faster
// than the gjson validation it replaced. [CheckTop] returns the body's
// top-level fields from that pass, and the formats walk what is inside
// them with [ForEach], which trusts the checked syntax and skips strings
// a word at a time: a body that can be megabytes is read in place
// rather than unmarshalled, as gjson values. A [Scan] goes further: it
// stops in the check's pass after each object the format's Fields mark
// as visited ([Fields.Visit]), a message say, and tells where its fields
// are, so that the format counts a long conversation in the one pass
// that checks it.
//
// A format may read the usual shape of its requests in a quicker pass of
// its own, which takes a body only where the check would and reads it
// only as the check does, and leaves every other body to the check: it
// reads values with the check's readers ([StringEnd], [NumberEnd],
// [ValueChecker]) and hands over what a Scan would ([ResultAt],
// [ShapeWith]). The OpenAI chat parse does, for bodies of plain
// lower-case keys, which need no folding.
//
// A body once checked has each field once, under one name, so an edit is
// unambiguous: [SetField] changes that one occurrence, under the name the
// body uses, and the state machine forwards the result. Fields whose
// values a format edits or branches on must be of their type: an
// options object that is a number, or a flag that is the string "true",
// is refused ([OptionalObject], [OptionalBool]) rather than read one way
// here and another way upstream. Output caps and counts are integers in
// range ([PositiveInt]); 1e3 is 1000, 1.0 and 1e309 are refused.
//
// # Usage reports
//
// A provider's usage report is untrusted too: every reader reads every
// count with [TokenCount], which keeps it within
// 0..accounting.MaxTokens whatever the number says, so that no sum of
// counts overflows.
//
// # Explaining an estimate
//
// A parse can explain itself: with [ParseOptions.Explain] set, each wire
// format reports every part it counts into Request.InputTokens — a
// message's text, an image and how it was priced, the tool schemas, the
// format's own overhead — and the parts sum to it exactly. The formats
// count through a [Tally], which adds and, only when explaining, names
// and reports, so that the server's parse, which does not explain, builds
// no name and allocates nothing for it. "tokenwarden estimate" prints the
// parts; the conformance suite checks that they add up for every body it
// feeds a format.
//
// # The rest
//
// What the wire formats have in common beyond the interface lives here
// too, so that each is written once: reading a body's top-level fields in
// one pass ([TopFields]), the start of a request whose model is named in
// its path ([NewPathRequest]), content types ([IsEventStream]), a bounded
// capture of a JSON response ([Capture]), and the defaults of the
// options. Package llmtest holds the conformance suite every wire
// format's tests run, and the differential check of each format against a
// model of its provider.
package llm
