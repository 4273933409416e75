// Package openai is the wire format of OpenAI's APIs and of the servers
// that copy them (vLLM, Azure OpenAI, Mistral, Groq, xAI, …): request
// inspection, body edits, usage extraction from JSON and SSE responses,
// and error replies in OpenAI's shape.
//
// Each endpoint is a value implementing llm.API: [Chat]
// (/v1/chat/completions), [Completions] (/v1/completions), [Embeddings]
// (/v1/embeddings) and [Responses] (/v1/responses). They share one usage
// model: OpenAI's usage object names input "prompt_tokens" (or
// "input_tokens"), with the cached part inside it, and output
// "completion_tokens" (or "output_tokens"), reasoning included.
//
// Requests are checked by llm.CheckBody against the fields each endpoint
// reads (fields.go): a repeated or differently cased "model",
// "max_tokens" or "stream_options" is refused, since OpenAI (Python) and
// the Go servers that copy it would read it differently. A chat request
// that sets both max_completion_tokens and max_tokens is reserved at the
// larger, as OpenAI reads the first and many compatible servers only the
// second. A chat body of the usual shape (plain lower-case keys, each
// once) is read by a quicker pass that needs no case folding (see
// exactChat) and takes only what the check takes. stream_options must
// be an object (or null) and include_usage a
// boolean, so that the injected include_usage lands where every server
// reads it. reasoning_effort (chat) and a reasoning object (Responses),
// unless "none", mark the request as reasoning that is billed but not
// streamed ([llm.Request].HiddenReasoning); "background": true marks a
// Responses request that runs on after its reply. With
// llm.ParseOptions.Model set (an Azure deployment mapped to its model),
// the body's "model", which Azure ignores, is not read.
//
// Usage is recognised by a non-null "usage" object wherever it appears
// (top level, "response.usage", "x_groq.usage"), so one stream reader
// handles OpenAI's single usage chunk before [DONE]
// (stream_options.include_usage), vLLM's cumulative usage on every chunk
// (the last one wins), Azure's content-filter chunks with empty choices
// and no usage, and the Responses API's terminal events. Events are read
// with gjson over the decoder's bytes, without copying or allocating.
package openai
