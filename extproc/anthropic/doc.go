// Package anthropic is the wire format of Anthropic's Messages API
// (/v1/messages): request inspection, the max_tokens edit, usage
// extraction from JSON and SSE responses, and error replies in
// Anthropic's shape.
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
