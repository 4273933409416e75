// Package bedrock is the wire format of Amazon Bedrock's Converse API
// (/model/{modelId}/converse and /model/{modelId}/converse-stream):
// request inspection, the inferenceConfig.maxTokens edit, usage extraction
// and error replies in AWS's shape.
//
// The model id is in the path, URL-encoded when it is an ARN. A
// non-streamed reply is JSON with a top-level "usage"; converse-stream is
// not SSE but a binary AWS event stream (package eventstream) whose
// messages are named by their :event-type header: messageStart,
// contentBlockStart/Delta/Stop, messageStop and then metadata, which
// carries the usage. The usage comes after messageStop, so the end of the
// message is not the end of the accounting. Errors mid-stream are
// messages with :message-type exception.
//
// A request is checked by llm.CheckBody against the fields Converse reads
// (content blocks, inferenceConfig.maxTokens, and Claude's thinking and
// Nova's reasoningConfig in additionalModelRequestFields): a repeated or
// differently cased one is refused. inferenceConfig and
// additionalModelRequestFields must be objects, so that the maxTokens edit
// lands where Bedrock reads it. Either reasoning option, unless of type
// "disabled", marks the request as reasoning billed as output but not
// streamed in full.
//
// Bedrock's inputTokens excludes the prompt cache (as Anthropic's does):
// accounting.Usage input is inputTokens + cacheReadInputTokens +
// cacheWriteInputTokens, with the cache reads as cached input and the
// cache writes as 5-minute writes.
package bedrock
