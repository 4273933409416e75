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
// Wire formats read bodies with gjson rather than unmarshalling them: a
// request body can be megabytes, and only a few fields matter.
//
// What the wire formats have in common beyond the interface lives here
// too, so that each is written once: reading a body's top-level fields in
// one pass and editing one ([TopFields], [SetField]), the start of a
// request whose model is named in its path ([NewPathRequest]), bounded
// validation of numbers ([PositiveInt]), content types ([IsEventStream]),
// a bounded capture of a JSON response ([Capture]), and the defaults of
// the options. Package llmtest holds the conformance suite every wire
// format's tests run.
package llm
