// Package sse decodes text/event-stream (Server-Sent Events) response bodies
// incrementally, in bounded memory and without allocating in steady state.
//
// Streamed LLM responses (OpenAI, Anthropic, Gemini with alt=sse) reach tokenwarden as
// ext_proc STREAMED chunks cut at arbitrary byte boundaries, and the usage that settles a
// request arrives in one of their events. A Decoder takes those chunks as they come, one
// Write per chunk, and hands each completed event to a callback; the usage extractors of
// the wire-format packages read the events there.
//
// # Rules
//
// The decoder follows the WHATWG HTML Standard's rules for interpreting an event stream
// (the ones EventSource implements), applied to bytes:
//
//   - A line ends in CRLF, LF or a lone CR. A CR that ends one Write and an LF that
//     starts the next are one terminator, so the result does not depend on where the
//     stream was split.
//   - A UTF-8 BOM at the very start of the stream is stripped, also when it arrives
//     split across Writes. Elsewhere it is ordinary content.
//   - A blank line dispatches the event, but only if a data field was seen: an event
//     with no data line is discarded (its type is reset), while "data:" alone gives an
//     event whose data is empty.
//   - A line starting with ':' is a comment and is ignored: proxies and some providers
//     send ": keep-alive" lines to hold idle connections open.
//   - A field line is split at its first colon and one leading space of the value is
//     dropped; a line without a colon is a field name with an empty value. Field names
//     are case-sensitive.
//   - "data" values are joined with "\n"; "event" sets the event type (empty means
//     "message"); "id" sets the last event ID, which persists across events as in
//     EventSource, unless the value contains NUL. "retry" and unknown fields are ignored.
//   - An event without its terminating blank line when the stream ends is never
//     dispatched. There is deliberately no Close or Flush: a cut stream's partial event
//     is not trustworthy usage.
//
// Unlike a browser, the decoder does not decode UTF-8: bytes pass through unchanged, and
// invalid UTF-8 is carried as is rather than replaced with U+FFFD. Every delimiter is
// ASCII, so this changes no framing; the JSON parsers downstream judge the payload.
//
// # Bounds
//
// Memory is bounded whatever the input, because an upstream (or whatever sits between
// it and tokenwarden) can send a line that never ends. The decoder never buffers a line:
// it acts on each piece as it arrives, holding at most the few bytes of a field name or
// BOM cut by a Write boundary. What it keeps is the pending event's data, up to
// Options.MaxEventBytes (1 MiB by default), and its type and ID, up to MaxFieldBytes
// each. Buffered reports the total.
//
// At the bound the decoder keeps the first MaxEventBytes bytes of the data, keeps
// counting the rest in Event.DataLen, and dispatches the event, when its blank line
// comes, with Truncated set. It never fails the stream: the caller decides what a
// truncated event is worth (its JSON will not parse; its length still estimates the
// output that was streamed). A type or ID longer than MaxFieldBytes is truncated silently.
//
// # Performance
//
// Line terminators are found with bytes.IndexByte. An event whose data line lies wholly
// inside one Write is handed to the callback as a slice of that Write's bytes, without a
// copy; only data that spans Writes is copied into the decoder's buffer, which is reused
// from event to event and across Reset, up to MaxKeptBytes (a buffer grown past that for
// one large event is dropped after it). Event slices are therefore valid only during the
// callback.
package sse
