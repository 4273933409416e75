// Package llmtest is the conformance suite of the wire-format packages
// (openai, anthropic, gemini, bedrock), in the spirit of testing/slogtest:
// what an [llm.API] must do with real provider traffic is written down
// once, here, and each package's test says only where its fixtures are
// and which API values they exercise:
//
//	func TestConformance(t *testing.T) {
//		llmtest.Run(t, llmtest.Config{Dir: fixtures, APIs: map[string]llm.API{"messages": Messages{}}})
//	}
//
// # Fixtures
//
// A package's fixtures are one folder, testdata/<api> at the root of the
// module (a [Dir]): request bodies, response bodies as the provider sends
// them (JSON, SSE, AWS event streams), and cases.json, which says what
// each must give:
//
//	{"responses": [{"file", "api", "content_type", "model", "usage", "observed", "note"}],
//	 "requests":  [{"file", "api", "path", "want", "error"}]}
//
// "api" is a key of [Config.APIs]. A response's "usage" is the
// accounting.Usage its reader reports at the end of the body (null: it
// reports none) and "observed" its ObservedOutputTokens. A request's
// "want" is the llm.Request ParseRequest returns for the body sent to
// "path", or "error" a part of the error it returns instead. The numbers
// are those of [ParseOptions] and [ReaderOptions].
//
// # What Run checks
//
//   - Every response fixture gives its usage and observed output whether
//     it is written whole, split in two at any byte, or byte by byte:
//     Envoy hands a body over in chunks cut wherever the network cut it,
//     so a reader that depends on the cuts would charge the same response
//     differently from one call to the next.
//   - Every request fixture parses to its Request, or fails with its
//     error, and explained ([llm.ParseOptions.Explain]) the same, in
//     parts that sum to its input estimate ([CheckExplained]). The
//     differential checks and the request fuzz targets check every body
//     they accept so too.
//   - Every file in the folder has an entry, so that no fixture goes
//     unchecked.
//
// # Differential checks
//
// [CheckDifferential] compares what a wire format reserves for a body with
// what the provider will do with it: the format parses and edits the
// body, encoding/json decodes the edited body as a Go provider would (the
// last of repeated keys wins), and a [View] of the provider, written from
// its API reference apart from the parser, reads it. They must agree on
// the model, streaming and its usage report, the output cap, the number of
// choices, hidden reasoning and background mode, and the estimate must
// count at least the prompt text the provider reads. [Bodies] makes
// request bodies full of what a client might try (repeated, escaped and
// differently cased keys, nulls, wrong types, numbers written oddly) from
// an API's [Knob]s; [RunDifferential] checks thousands of them, and the
// request fuzz targets check whatever the fuzzer makes of them.
//
// # Helpers
//
// The rest of the package is what the packages' own tests share, so that
// each is written once: the bodies of fuzz targets seeded from the same
// fixtures ([FuzzReader], [FuzzRequests]; the FuzzXxx functions stay in
// each package, where go test -fuzz finds them), benchmarks of a reader
// and of request parsing ([BenchReader], [BenchParse]), checks of model
// paths, refused requests, absurd usage counts and mid-stream errors, and
// a [Recorder] for
// pointing a vendor's SDK at replayed fixtures and at tokenwarden's own
// error replies.
//
// llmtest imports package testing: it is for tests only, never for the
// server.
package llmtest
