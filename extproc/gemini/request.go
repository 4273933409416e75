package gemini

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// Estimation constants. Gemini's tokenizer is not public.
const (
	tokensPerContent = 3
	// mediaMinTokens is what the smallest image (or one PDF page, or one
	// second of video) costs.
	mediaMinTokens = 258
	// mediaTokensPerKiB charges inline media by decoded size: a 1024-px
	// JPEG (~200 KiB) is four 258-token tiles; audio (32 tokens/s) and
	// video (~263 tokens/s) run at a few tokens per KiB at common bit
	// rates.
	mediaTokensPerKiB = 5
	// maxCandidates is Gemini's bound on candidateCount.
	maxCandidates = 8
)

// GenerateContent is the generateContent and streamGenerateContent API.
type GenerateContent struct{}

var _ llm.API = GenerateContent{}

// Name implements llm.API.
func (GenerateContent) Name() string { return "gemini.generate_content" }

// field returns the first of a proto field's JSON names that is present:
// Google's JSON parser accepts lowerCamelCase and the proto's snake_case.
func field(v gjson.Result, camel, snake string) gjson.Result {
	if r := v.Get(camel); r.Exists() {
		return r
	}
	return v.Get(snake)
}

// ParseRequest implements llm.API. The model and streaming come from the
// path.
func (GenerateContent) ParseRequest(path string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	req, err := llm.NewPathRequest(path, body, ModelFromPath)
	if err != nil {
		return req, err
	}
	f := llm.TopFields(gjson.Parse(llm.View(body)), "contents", "systemInstruction", "system_instruction", "tools",
		"cachedContent", "cached_content", "generationConfig", "generation_config")
	either := func(a, b gjson.Result) gjson.Result {
		if a.Exists() {
			return a
		}
		return b
	}
	contents, sys, tools := f[0], either(f[1], f[2]), f[3]
	cachedContent, cfg := either(f[4], f[5]), either(f[6], f[7])
	count := func(s string) int64 { return opts.TokenCounter().CountTokens(req.Model, s) }
	var notes []string

	var in int64
	if !contents.IsArray() {
		return req, errors.New("contents must be an array")
	}
	var bad error
	contents.ForEach(func(_, c gjson.Result) bool {
		if !c.IsObject() {
			bad = errors.New("each content must be an object")
			return false
		}
		n, fileData := partsTokens(c.Get("parts"), count)
		in += tokensPerContent + n
		if fileData {
			notes = llm.AppendNote(notes, "fileData parts are counted as one image: their size is unknown")
		}
		return true
	})
	if bad != nil {
		return req, bad
	}
	if sys.IsObject() {
		n, _ := partsTokens(sys.Get("parts"), count)
		in += tokensPerContent + n
	}
	if tools.IsArray() {
		in += count(tools.Raw)
	}
	if cachedContent.Type == gjson.String && cachedContent.Str != "" {
		notes = llm.AppendNote(notes, "cachedContent: the cached prompt is billed as input but not counted")
	}
	req.InputTokens = in
	req.Notes = strings.Join(notes, "; ")

	req.OutputCap, req.CapGiven, err = llm.PositiveInt(field(cfg, "maxOutputTokens", "max_output_tokens"), "maxOutputTokens", llm.MaxOutputCap)
	if err != nil {
		return req, err
	}
	if !req.CapGiven {
		req.OutputCap = opts.DefaultOutputCap
	}
	n, given, err := llm.PositiveInt(field(cfg, "candidateCount", "candidate_count"), "candidateCount", maxCandidates)
	if err != nil {
		return req, err
	}
	if given {
		req.Choices = n
	}
	return req, nil
}

// partsTokens counts a Content's parts. fileData reports a part that
// points at a file whose size cannot be known here.
func partsTokens(parts gjson.Result, count func(string) int64) (n int64, fileData bool) {
	parts.ForEach(func(_, p gjson.Result) bool {
		p.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "text":
				n += count(v.Str)
			case "inlineData", "inline_data":
				decoded := int64(len(v.Get("data").Str)) * 3 / 4
				n += max(decoded/1024*mediaTokensPerKiB, mediaMinTokens)
			case "fileData", "file_data":
				n += mediaMinTokens
				fileData = true
			case "thought", "thoughtSignature", "thought_signature", "videoMetadata", "video_metadata", "partMetadata":
				// Flags and opaque signatures, not prompt text.
			default:
				// functionCall, functionResponse, executable code and
				// parts not known yet: their JSON, high but never free.
				n += count(v.Raw)
			}
			return true
		})
		return true
	})
	return n, fileData
}

// Inject implements llm.API: it sets generationConfig.maxOutputTokens when
// absent, inside whichever spelling of generationConfig the body uses
// (both in one body would be a duplicate field).
func (GenerateContent) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.OutputCap || req.CapGiven {
		return nil, nil
	}
	path := "generationConfig.maxOutputTokens"
	f := llm.TopFields(gjson.Parse(llm.View(body)), "generationConfig", "generation_config")
	if !f[0].Exists() && f[1].Exists() {
		path = "generation_config.max_output_tokens"
	}
	return llm.SetField(body, path, req.OutputCap)
}
