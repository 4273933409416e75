// Package extproc is tokenwarden's Envoy external-processing service: one
// state machine per HTTP request, Envoy's messages in, decisions and
// mutations out. It is the only package that knows gRPC.
//
// An embedder builds a [Server] with [NewServer] from [Options] (the
// config package reads them from a file) and an accounting.Limiter,
// creates a grpc.Server with [Server.ServerOptions], and calls [Register],
// which adds the gRPC health service Envoy checks. [Server.Reload] swaps
// in new options (and a reconfigured Limiter) for the streams that start
// after it; each stream keeps the options it started with to its end.
//
// # One request
//
//	request_headers   the API kind, then identity attributes; 401 when a
//	                  required attribute is missing. A path that is not an
//	                  LLM API's passes untouched, before identity: nothing
//	                  more of it is sent (mode_override). With
//	                  Options.CountOtherPaths it is counted on the requests
//	                  dimension only, here, and its bodies are not sent.
//	request_body      the wire format (internal/llm and its
//	                  implementations) reads model, output cap and text;
//	                  the accounting.Limiter reserves the estimate on every
//	                  applicable limit; the reply continues (with body
//	                  edits), or is a 429, 503 or 400 in the API's own
//	                  error shape.
//	response_headers  the x-ratelimit-* headers of the reservation replace
//	                  the upstream's; the status decides the settlement.
//	                  For a reservation on provider limits (scoped by the
//	                  provider attribute), the provider's 429 and remaining
//	                  figures are read first, and correct those limits at
//	                  settlement (accounting.ProviderState).
//	response_body     chunks are passed through untouched and fed to the
//	                  API's usage reader; the reservation is settled before
//	                  the reply to the last chunk.
//
// A stream that ends early — Envoy cancels it when the client disconnects,
// or it ends with EOF — settles the reservation with what is known: the
// provider's usage if it was already seen, else the input estimate plus
// the output observed so far, or the whole reservation when none of the
// response's body was seen (see settlement.go). Settlement never depends
// on the stream's context, which is already cancelled by then.
//
// # On the wire
//
// A server sits in front of every LLM call, so what it costs per message
// matters as much as what it decides. The codec [Server.ServerOptions]
// installs (codec.go) decodes Envoy's messages by hand (requestwire.go,
// attributeswire.go): headers, bodies, trailers, protocol_config and
// scalar attributes, in a few allocations per message; anything else a
// message carries, and anything malformed, is decoded by protobuf-go, so
// the result is always protobuf-go's. The largest replies (the response headers', the release of an edited
// body, dynamic metadata) are written in their wire form (replywire.go)
// into buffers borrowed from a pool until the reply is sent (lend.go);
// the codec sends those bytes as they are, and the replies that streams
// share in an encoding it made once. BENCHMARKS.md in the repository has
// the figures.
//
// # Tracing
//
// With Options.TracerProvider set, each request gets two OpenTelemetry
// spans: [SpanDecision], from the message the decision is made on to the
// decision (api, model, outcome, the limit that tripped, the estimate,
// the store's time), and [SpanSettlement], around the booking of the
// real usage (basis, tokens, cost, whether the stream completed). Both
// join the trace the request came with: the W3C trace context of
// Envoy's own span for the ext_proc call, which Envoy with tracing on
// sends in the gRPC stream's metadata, or else a traceparent header of
// the request. A request without either starts a trace at its decision,
// which the settlement joins. The settlement span is recorded however
// the stream ends, a cut one included. Sampling is the provider's (a
// parent-based sampler follows Envoy's decision). Identity values stay
// out of spans unless Options.TraceAttributes names them. Without a
// provider, no tracing work is done at all.
package extproc
