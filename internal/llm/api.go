package llm

import (
	"github.com/tokenwarden/tokenwarden/accounting"
)

// API is one LLM API's wire format. Implementations are stateless and
// safe for concurrent use; per-response state lives in a UsageReader.
type API interface {
	// Name is the API kind: the value of the "api" attribute and of
	// metrics labels, e.g. "openai.chat".
	Name() string
	// ParseRequest reads what admission needs from a request body. path
	// is the request's :path (some APIs name the model there). An error
	// means the body is unusable: the caller replies 400 with its text.
	ParseRequest(path string, body []byte, opts ParseOptions) (Request, error)
	// Inject returns the body with the edits opts ask for (an output cap
	// where the request has none, a stream-usage option), or nil when
	// nothing changes. Edits keep the rest of the body byte for byte,
	// and write into opts.Buf when it has the room; body itself is not
	// modified.
	Inject(body []byte, req *Request, opts InjectOptions) ([]byte, error)
	// NewUsageReader returns a reader for the response to req, whose
	// content type is contentType.
	NewUsageReader(req *Request, contentType string, opts ReaderOptions) UsageReader
	// RenderError renders one of tokenwarden's own error replies in the
	// API's error shape.
	RenderError(e Error) Reply
}

// ParseOptions configure request parsing.
type ParseOptions struct {
	// Counter counts the tokens of text and images in the request; nil
	// means the calibrated default (tokenizer.Default).
	Counter Counter
	// DefaultOutputCap is the output cap assumed when the request sets
	// none.
	DefaultOutputCap int64
	// Model, when set, is the request's model as its path names it (an
	// Azure OpenAI deployment, mapped to its model): the provider ignores
	// the body's "model", so the parser neither requires nor reads it.
	Model string
	// Explain, when set, is called with each part of the input estimate
	// as it is counted (see [Tally]): the parts' tokens sum to the
	// Request's InputTokens. A parse that fails may have reported some
	// parts first. Nil, as on the server's path, costs nothing.
	Explain func(Part)
}

// TokenCounter returns Counter, or the calibrated default.
func (o ParseOptions) TokenCounter() Counter { return counterOr(o.Counter) }

// InjectOptions say which body edits to make.
type InjectOptions struct {
	// OutputCap adds the API's output-cap field, set to the request's
	// OutputCap, when the request has none.
	OutputCap bool
	// StreamUsage asks a streaming API that reports usage only on request
	// (OpenAI) to report it.
	StreamUsage bool
	// Buf, when its capacity holds the edited body, is where the edits
	// write it, from Buf's start; otherwise, or when nil, they allocate
	// it. The caller lends Buf for as long as it uses the edited body;
	// Buf must not share memory with the body being edited.
	Buf []byte
}

// ReaderOptions configure a UsageReader.
type ReaderOptions struct {
	// Counter estimates the tokens of output observed in the stream, for
	// a response cut short before it reports usage; nil means the
	// calibrated default.
	Counter Counter
	// MaxBuffer bounds the bytes a reader keeps (a JSON body, one SSE
	// event); zero means DefaultMaxBuffer.
	MaxBuffer int
}

// DefaultMaxBuffer is what a zero ReaderOptions.MaxBuffer means. 4 MiB
// holds a Responses API response.completed event that repeats a long
// output before its usage (a truncated event would lose the usage), and
// a JSON reply whose usage follows megabytes of embeddings is read from
// its tail (see Capture).
const DefaultMaxBuffer = 4 << 20

// BufferSize returns MaxBuffer, or DefaultMaxBuffer when it is not
// positive.
func (o ReaderOptions) BufferSize() int {
	if o.MaxBuffer <= 0 {
		return DefaultMaxBuffer
	}
	return o.MaxBuffer
}

// TokenCounter returns Counter, or the calibrated default.
func (o ReaderOptions) TokenCounter() Counter { return counterOr(o.Counter) }

// Request is what admission needs to know about a request.
type Request struct {
	Model  string
	Stream bool
	// InputTokens is the estimated input, overheads included.
	InputTokens int64
	// OutputCap is the output cap per choice: the request's own, or the
	// default when CapGiven is false.
	OutputCap int64
	CapGiven  bool
	// CapSource says where OutputCap came from: the body's field
	// ("max_tokens", "inferenceConfig.maxTokens"), or how the default
	// was arrived at ("default_output_cap", "default_output_cap +
	// thinking.budget_tokens"). Empty for an API without output.
	CapSource string
	// Choices is how many completions the request asks for (n).
	Choices int64
	// StreamUsage reports that a streaming request already asks for
	// usage to be reported.
	StreamUsage bool
	// HiddenReasoning reports that the request turns on reasoning that is
	// billed as output but not streamed in full (Anthropic's and
	// Bedrock's thinking, Gemini's thinkingConfig, OpenAI's reasoning
	// options): without a usage report, the output seen understates the
	// output billed.
	HiddenReasoning bool
	// OutputBeyondCap reports that the provider may bill more output than
	// OutputCap × Choices even when it was sent the cap: Gemini's
	// thinking (a guide the model may overshoot, documented apart from
	// maxOutputTokens), Amazon Nova's reasoning on Bedrock. OpenAI's,
	// Anthropic's and Converse's caps include reasoning.
	OutputBeyondCap bool
	// Background reports a Responses API request with "background": true:
	// the generation runs on after the reply, whose usage is null.
	Background bool
	// ServiceTier is the processing tier the request asks for (OpenAI's
	// "service_tier": "priority", "flex", …), which the provider bills at
	// its own rate; "" when it names none.
	ServiceTier string
	// Notes explain what the estimate could not see, e.g. server-side
	// conversation history that is billed as input too.
	Notes string
	// Shape is what the parse's check learned of the body's top-level
	// object, for Inject's edits (see [Shape]). A parse may leave it
	// zero, which costs Inject a search of the body.
	Shape Shape
}

// DefaultCap is the CapSource of an output cap that is the default,
// ParseOptions.DefaultOutputCap (the config's default_output_cap).
const DefaultCap = "default_output_cap"

// AppendNote returns notes with note added unless it is there already: a
// request is explained once for each thing the estimate could not see,
// however often the thing occurs in it. Wire formats join the notes with
// "; " into Request.Notes.
func AppendNote(notes []string, note string) []string {
	for _, n := range notes {
		if n == note {
			return notes
		}
	}
	return append(notes, note)
}

// Estimate returns the reservation the request needs.
func (r *Request) Estimate() accounting.Estimate {
	choices := max(r.Choices, 1)
	out := accounting.ClampTokens(r.OutputCap)
	if out > 0 && choices > accounting.MaxTokens/out {
		out = accounting.MaxTokens
	} else {
		out *= choices
	}
	return accounting.Estimate{InputTokens: accounting.ClampTokens(r.InputTokens), OutputTokens: out}
}

// UsageBound is the most usage the request could have produced, which a
// usage report is held to (see [accounting.Usage.Within]): input up to
// contextWindow, the model's; output up to the cap times the choices,
// when capSent says the provider was sent the cap (the request's own or
// one injected), or else, or for output beyond the cap
// (OutputBeyondCap), up to contextWindow per choice.
func (r *Request) UsageBound(capSent bool, contextWindow int64) accounting.Usage {
	out := r.Estimate().OutputTokens
	if !capSent || r.OutputBeyondCap {
		out = (&Request{OutputCap: contextWindow, Choices: r.Choices}).Estimate().OutputTokens
	}
	return accounting.Usage{InputTokens: accounting.ClampTokens(contextWindow), OutputTokens: out}
}

// UsageReader follows one response body and reports what it cost.
type UsageReader interface {
	// Write feeds the next bytes of the response body, as the client
	// receives them (after decompression). It must not retain p, and must
	// keep its memory bounded whatever it is fed.
	Write(p []byte)
	// Usage returns the usage the provider reported, if it has so far.
	Usage() (accounting.Usage, bool)
	// ObservedOutputTokens estimates the output seen so far, for a
	// response that ends before reporting usage.
	ObservedOutputTokens() int64
	// Final reports whether Usage is the provider's last word on the
	// response, rather than a running total a cut stream stopped short
	// of (Anthropic's message_start before its message_delta, a Gemini
	// snapshot before its finishReason). A running total shows only the
	// output streamed so far: reasoning the stream does not show may
	// already be billed.
	Final() bool
}
