package gemini

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// Estimation constants. Gemini's tokenizer is not public.
const (
	tokensPerContent = 3
	// maxCandidates is Gemini's bound on candidateCount.
	maxCandidates = 8
)

// GenerateContent is the generateContent and streamGenerateContent API.
type GenerateContent struct{}

var _ llm.API = GenerateContent{}

// Name implements llm.API.
func (GenerateContent) Name() string { return "gemini.generate_content" }

// Google's JSON parser accepts a proto field under its lowerCamelCase
// name and under its proto (snake_case) name: each field below is
// declared under both, so that llm.CheckBody refuses a body with both
// and SetField edits the one the body has.

// protoFields returns Fields with the named fields, read as a whole, each
// under both of its names.
func protoFields(names ...string) *llm.Fields {
	f := llm.NewFields()
	for _, n := range names {
		f.Read(n)
		alias(f, n)
	}
	return f
}

// protoNest declares on f the field name, read into with inner, under
// both of its names.
func protoNest(f *llm.Fields, name string, inner *llm.Fields) *llm.Fields {
	f.Nest(name, inner)
	alias(f, name)
	return f
}

// alias declares the snake_case name of the field camel, if it has one.
func alias(f *llm.Fields, camel string) {
	var sb strings.Builder
	for _, r := range camel {
		if 'A' <= r && r <= 'Z' {
			sb.WriteByte('_')
			r += 'a' - 'A'
		}
		sb.WriteRune(r)
	}
	if snake := sb.String(); snake != camel {
		f.Alias(camel, snake)
	}
}

// The fields GenerateContent reads.
var (
	partFields    = protoNest(protoFields("text", "fileData"), "inlineData", protoFields("data"))
	contentFields = protoNest(llm.NewFields(), "parts", partFields)
	configFields  = protoNest(protoFields("maxOutputTokens", "candidateCount"),
		"thinkingConfig", protoFields("thinkingBudget", "thinkingLevel"))
	requestFields = protoNest(protoNest(protoNest(protoFields("tools", "cachedContent"),
		"contents", contentFields),
		"systemInstruction", contentFields),
		"generationConfig", configFields)
)

// field returns the field of v under its camelCase name or its snake_case
// one: a body that llm.CheckBody accepted has at most one of them.
func field(v gjson.Result, camel, snake string) gjson.Result {
	if r := v.Get(camel); r.Exists() {
		return r
	}
	return v.Get(snake)
}

// ParseRequest implements llm.API. The model and streaming come from the
// path. A thinkingConfig turns thinking on (HiddenReasoning) unless its
// thinkingBudget is 0.
func (GenerateContent) ParseRequest(path string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var buf [8]gjson.Result
	req, f, err := llm.NewPathRequest(path, body, requestFields, ModelFromPath, buf[:0], "contents", "systemInstruction", "system_instruction", "tools",
		"cachedContent", "cached_content", "generationConfig", "generation_config")
	if err != nil {
		return req, err
	}
	either := func(a, b gjson.Result) gjson.Result {
		if a.Exists() {
			return a
		}
		return b
	}
	contents, sys, tools := f[0], either(f[1], f[2]), f[3]
	cachedContent, cfg := either(f[4], f[5]), either(f[6], f[7])
	tc := llm.NewTextCounter(opts.Counter, req.Model)
	count := tc.Count
	var notes []string

	t := llm.NewTally(opts.Explain)
	if !contents.IsArray() {
		return req, errors.New("contents must be an array")
	}
	var bad error
	llm.ForEach(contents, func(i, c gjson.Result) bool {
		if !c.IsObject() {
			bad = errors.New("each content must be an object")
			return false
		}
		outer := t.Enter("contents", int(i.Num), c)
		t.Overhead(tokensPerContent)
		if partsTokens(c.Get("parts"), &t, count) {
			notes = llm.AppendNote(notes, "fileData parts are counted as one image: their size is unknown")
		}
		t.Leave(outer)
		return true
	})
	if bad != nil {
		return req, bad
	}
	if sys.IsObject() {
		outer := t.Within("systemInstruction")
		t.Overhead(tokensPerContent)
		partsTokens(sys.Get("parts"), &t, count)
		t.Leave(outer)
	}
	if tools.IsArray() {
		t.AddDetail("tools", count(tools.Raw), llm.DetailJSON)
	}
	if cachedContent.Type == gjson.String && cachedContent.Str != "" {
		notes = llm.AppendNote(notes, "cachedContent: the cached prompt is billed as input but not counted")
	}
	req.InputTokens = t.Done("content format overhead", "3 a content, an approximation: Gemini's is not published")
	req.Notes = strings.Join(notes, "; ")

	if err := llm.OptionalObject(cfg, "generationConfig"); err != nil {
		return req, err
	}
	req.OutputCap, req.CapGiven, err = llm.PositiveInt(field(cfg, "maxOutputTokens", "max_output_tokens"), "maxOutputTokens", llm.MaxOutputCap)
	if err != nil {
		return req, err
	}
	req.CapSource = "generationConfig.maxOutputTokens"
	if !req.CapGiven {
		req.OutputCap, req.CapSource = opts.DefaultOutputCap, llm.DefaultCap
	}
	n, given, err := llm.PositiveInt(field(cfg, "candidateCount", "candidate_count"), "candidateCount", maxCandidates)
	if err != nil {
		return req, err
	}
	if given {
		req.Choices = n
	}
	var off bool
	req.HiddenReasoning, off, err = thinking(field(cfg, "thinkingConfig", "thinking_config"))
	// Models since 2.5 think unless told not to, and Google documents
	// their thinking apart from maxOutputTokens, with a budget the model
	// may overshoot: only thinking turned off bounds the output by the
	// cap.
	req.OutputBeyondCap = !off
	return req, err
}

// thinking reads a thinkingConfig and reports whether it turns thinking
// on: a thinkingBudget of 0 turns it off (off), any other (-1 is
// dynamic) or none (the model's default) leaves it on, and so does a
// thinkingLevel. Thinking is billed as output and streamed, at most, as
// a summary.
func thinking(cfg gjson.Result) (on, off bool, err error) {
	if err := llm.OptionalObject(cfg, "thinkingConfig"); err != nil || !cfg.IsObject() {
		return false, false, err
	}
	if _, err := llm.OptionalString(field(cfg, "thinkingLevel", "thinking_level"), "thinkingConfig.thinkingLevel"); err != nil {
		return false, false, err
	}
	switch budget := field(cfg, "thinkingBudget", "thinking_budget"); budget.Type {
	case gjson.Null:
		return true, false, nil
	case gjson.Number:
		if n, err := strconv.ParseInt(budget.Raw, 10, 64); err == nil && n >= -1 {
			return n != 0, n == 0, nil
		}
	}
	return false, false, errors.New("thinkingConfig.thinkingBudget must be an integer of -1 or more")
}

// partsTokens counts a Content's parts into t, and reports a part that
// points at a file whose size cannot be known here (fileData).
func partsTokens(parts gjson.Result, t *llm.Tally, count func(string) int64) (fileData bool) {
	llm.ForEach(parts, func(_, p gjson.Result) bool {
		llm.ForEach(p, func(k, v gjson.Result) bool {
			switch k.Str {
			case "text":
				t.Add("text", count(v.Str))
			case "inlineData", "inline_data":
				decoded := int64(len(v.Get("data").Str)) * 3 / 4
				t.AddDetail("inlineData", max(decoded/1024*tokenizer.GeminiMediaTokensPerKiB, tokenizer.GeminiMediaMinTokens),
					"%d bytes, %d tokens a KiB, at least %d", decoded, tokenizer.GeminiMediaTokensPerKiB, tokenizer.GeminiMediaMinTokens)
			case "fileData", "file_data":
				t.AddDetail("fileData", tokenizer.GeminiMediaMinTokens, "its size is unknown: charged as one image")
				fileData = true
			case "thought", "thoughtSignature", "thought_signature", "videoMetadata", "video_metadata", "partMetadata":
				// Flags and opaque signatures, not prompt text.
			default:
				// functionCall, functionResponse, executable code and
				// parts not known yet: their JSON, high but never free.
				t.AddJSON(k.Str, count(v.Raw))
			}
			return true
		})
		return true
	})
	return fileData
}

// Inject implements llm.API: it sets generationConfig.maxOutputTokens when
// absent, under whichever names the body gives the config and the field
// (llm.SetField).
func (GenerateContent) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.OutputCap || req.CapGiven {
		return nil, nil
	}
	return llm.SetFieldIn(opts.Buf, body, requestFields, req.OutputCap, "generationConfig", "maxOutputTokens")
}
