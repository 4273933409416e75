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
// Usage is recognised by a non-null "usage" object wherever it appears
// (top level, "response.usage", "x_groq.usage"), so one stream reader
// handles OpenAI's single usage chunk before [DONE]
// (stream_options.include_usage), vLLM's cumulative usage on every chunk
// (the last one wins), Azure's content-filter chunks with empty choices
// and no usage, and the Responses API's terminal events. Events are read
// with gjson over the decoder's bytes, without copying or allocating.
package openai
