package openai

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// CompletionsDefaultCap is OpenAI's own max_tokens default for
// /v1/completions (vLLM copies it).
const CompletionsDefaultCap = 16

// Completions is the legacy /v1/completions API.
//
// A request without max_tokens gets only 16 tokens from OpenAI. By default
// the estimate (and an injected max_tokens) use the configured
// default_output_cap instead, as for every other API: many compatible
// servers do not apply OpenAI's default. Set ProviderDefaultCap to charge
// and inject OpenAI's 16, which keeps the caller's output unchanged.
type Completions struct {
	ProviderDefaultCap bool
}

var _ llm.API = Completions{}

// Name implements llm.API.
func (Completions) Name() string { return "openai.completions" }

// ParseRequest implements llm.API. best_of and n multiply the output, and
// so does every prompt of a batch (an array of prompts).
func (c Completions) ParseRequest(_ string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var out [maxFields]gjson.Result
	f, req, err := parseBody(body, completionsFields, opts, &out, "prompt", "suffix", "max_tokens", "n", "best_of", "stream_options")
	if err != nil {
		return req, err
	}
	prompt, suffix, maxTokens, nField, bestOfField, streamOpts := f[0], f[1], f[2], f[3], f[4], f[5]
	tc := llm.NewTextCounter(opts.Counter, req.Model)
	count := tc.Count
	t := llm.NewTally(opts.Explain)
	prompts, err := promptTokens(prompt, "prompt", &t, count)
	if err != nil {
		return req, err
	}
	if suffix.Type == gjson.String {
		t.AddDetail("suffix", count(suffix.Str)*prompts, "once for each of %d prompts", prompts)
	}
	req.InputTokens = t.Done("", "")

	req.OutputCap, req.CapGiven, err = outputCap(maxTokens, "max_tokens")
	if err != nil {
		return req, err
	}
	req.CapSource = "max_tokens"
	if !req.CapGiven {
		req.OutputCap, req.CapSource = opts.DefaultOutputCap, llm.DefaultCap
		req.Notes = "max_tokens absent: OpenAI defaults to 16, the estimate uses default_output_cap"
		if c.ProviderDefaultCap {
			req.OutputCap, req.CapSource = CompletionsDefaultCap, "OpenAI's default max_tokens"
			req.Notes = ""
		}
	}
	n, given, err := llm.PositiveInt(nField, "n", maxChoices)
	if err != nil {
		return req, err
	}
	if !given {
		n = 1
	}
	bestOf, given, err := llm.PositiveInt(bestOfField, "best_of", maxChoices)
	if err != nil {
		return req, err
	}
	if !given {
		bestOf = 1
	}
	// best_of candidates are generated (and billed) server-side; n of
	// them are returned.
	req.Choices = max(n, bestOf) * prompts
	req.StreamUsage, err = streamUsage(streamOpts)
	return req, err
}

// Inject implements llm.API.
func (Completions) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	var out []byte
	var err error
	if opts.OutputCap && !req.CapGiven {
		if out, err = llm.SetFieldIn(opts.Buf, body, completionsFields, req.OutputCap, "max_tokens"); err != nil {
			return nil, err
		}
	}
	return injectStreamUsage(body, out, completionsFields, &llm.Shape{}, req, opts)
}

// NewUsageReader implements llm.API.
func (Completions) NewUsageReader(req *llm.Request, contentType string, opts llm.ReaderOptions) llm.UsageReader {
	if llm.IsEventStream(contentType) {
		return NewStreamReader(req.Model, opts, CompletionsDeltaText)
	}
	return llm.NewJSONReader(req.Model, opts, ParseUsage, CompletionsReplyText)
}

// RenderError implements llm.API.
func (Completions) RenderError(e llm.Error) llm.Reply { return RenderError(e) }
