// Package anthropic is the wire format of Anthropic's Messages API
// (/v1/messages): request inspection, the max_tokens edit, usage
// extraction from JSON and SSE responses, and error replies in
// Anthropic's shape.
//
// A request is checked by llm.CheckBody against the fields Messages reads,
// content blocks included, so that a repeated or differently cased
// max_tokens, model or thinking.budget_tokens is refused rather than read
// differently from Anthropic. A thinking option of any type but
// "disabled" ("enabled" with a budget, "adaptive") marks the request as
// reasoning that is billed as output but streamed at most as a summary
// ([llm.Request].HiddenReasoning); without max_tokens, the injected one is
// the default cap plus the thinking budget, which max_tokens must exceed.
//
// Anthropic reports input in three parts: "input_tokens" excludes the
// prompt cache, "cache_creation_input_tokens" were written to it (split
// by lifetime in "cache_creation": ephemeral_5m_input_tokens and
// ephemeral_1h_input_tokens) and "cache_read_input_tokens" were read from
// it. accounting.Usage wants them as one total with the cached parts
// inside it, so the reader keeps the raw fields and adds them up only when
// asked (see [UsageFields]).
//
// A stream reports usage twice: message_start carries the input and cache
// counts with a token or two of output, and message_delta carries the
// output so far, cumulatively (its input and cache fields, when present,
// replace the earlier ones). Until message_delta arrives the output count
// is provisional, so a stream cut between the two is charged the larger of
// it and the output actually observed.
package anthropic
