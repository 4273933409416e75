package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// maxEstimateBody bounds the body "tokenwarden estimate" reads: the
// largest message the server accepts.
const maxEstimateBody = 64 << 20

// Chat-format overheads, as in extproc/openai: a few tokens wrap every
// message, a name costs one more, and the reply is primed with three.
const (
	estTokensPerMessage = 3
	estTokensPerRole    = 1
	estTokensPerName    = 1
	estReplyPriming     = 3
	// estCompletionsCap is the legacy completions API's default max_tokens.
	estCompletionsCap = 16
)

// runEstimate implements "tokenwarden estimate": it reads a request body
// (a file, or stdin for "-" or none) and prints what admission would
// reserve for it, part by part, so that an operator can see where a
// surprising 429 came from.
//
// Until the config loader and the wire-format parsers are wired in, it
// takes the estimation settings as flags and reads the body itself.
func runEstimate(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenwarden estimate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tokenwarden estimate [flags] [FILE|-]\n\nPrints the token estimate of a request body, part by part.")
		fs.PrintDefaults()
	}
	model := fs.String("model", "", "model `name` (default: the body's \"model\", or the path's for Gemini and Bedrock)")
	path := fs.String("path", "/v1/chat/completions", "API `path` the body is sent to")
	mode := fs.String("tokenizer", "approximate", "approximate | exact")
	cpt := fs.Float64("chars-per-token", tokenizer.ReferenceCharsPerToken, "the approximation's rate (a scale: 4 is calibrated)")
	defaultCap := fs.Int64("default-output-cap", extproc.DefaultOutputCap, "output cap assumed when the request sets none")
	priceIn := fs.Float64("price-input", 0, "input price, USD per 1M tokens")
	priceOut := fs.Float64("price-output", 0, "output price, USD per 1M tokens")
	configPath := fs.String("config", "", "take the tokenizer, default output cap and prices from this config `file` (the server's own settings)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg *config.Config
	if *configPath != "" {
		var err error
		if cfg, err = loadConfig(*configPath); err != nil {
			return fmt.Errorf("estimate: %w", err)
		}
		*defaultCap = cmp.Or(cfg.Server.DefaultOutputCap, extproc.DefaultOutputCap)
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("estimate: one body at a time, got %d files", fs.NArg())
	}
	if *defaultCap < 1 {
		return errors.New("estimate: -default-output-cap must be at least 1")
	}
	if *priceIn < 0 || *priceOut < 0 {
		return errors.New("estimate: prices must not be negative")
	}
	tcfg := tokenizer.Config{Mode: tokenizer.Mode(*mode), CharsPerToken: *cpt}
	if cfg != nil {
		tcfg = cfg.Tokenizer
	}
	counter, err := tokenizer.New(tcfg)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	body, err := readEstimateBody(fs.Arg(0), stdin)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	est, err := estimateRequest(*path, body, *model, counter, *defaultCap)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	price := accounting.Price{Input: *priceIn, Output: *priceOut}
	if cfg != nil {
		price, _ = cfg.Accounting.Prices.Lookup(est.Model)
	}
	printEstimate(stdout, est, counter, price)
	return nil
}

func readEstimateBody(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, maxEstimateBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxEstimateBody {
		return nil, fmt.Errorf("body larger than %d MiB", maxEstimateBody>>20)
	}
	return body, nil
}

// requestEstimate is a request's estimate, broken down.
type requestEstimate struct {
	API, Model string
	Parts      []estimatePart
	Input      int64
	// CapField names where the output cap came from: the request's field,
	// or "default" when it has none.
	CapField string
	Cap      int64
	Choices  int64
	Output   int64
	Notes    []string
}

// estimatePart is one line of the input breakdown.
type estimatePart struct {
	Name   string
	Tokens int64
	Detail string
}

// estimator accumulates a breakdown.
type estimator struct {
	counter *tokenizer.Counter
	est     requestEstimate
}

func (e *estimator) add(name string, tokens int64, detail string) {
	e.est.Parts = append(e.est.Parts, estimatePart{name, tokens, detail})
	e.est.Input += tokens
}

func (e *estimator) text(name, s string) {
	if s != "" {
		e.add(name, e.counter.CountTokens(e.est.Model, s), "")
	}
}

func (e *estimator) note(n string) { e.est.Notes = append(e.est.Notes, n) }

// estimateRequest breaks down the estimate of body sent to path.
func estimateRequest(path string, body []byte, model string, counter *tokenizer.Counter, defaultCap int64) (*requestEstimate, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("body is not valid JSON")
	}
	doc := gjson.ParseBytes(body)
	if !doc.IsObject() {
		return nil, errors.New("body is not a JSON object")
	}
	api, pathModel := apiOf(path)
	if api == "" {
		return nil, fmt.Errorf("%q is not an API path tokenwarden estimates (chat/completions, completions, embeddings, responses, messages, :generateContent, converse)", path)
	}
	if model == "" {
		model = pathModel
	}
	if model == "" {
		model = doc.Get("model").String()
	}
	if model == "" {
		return nil, errors.New("no model: the body has none; pass -model")
	}
	e := &estimator{counter: counter, est: requestEstimate{API: api, Model: model, Choices: 1}}
	switch api {
	case "openai.chat":
		e.chat(doc)
	case "openai.completions":
		e.completions(doc)
	case "openai.embeddings":
		e.embeddings(doc)
	case "openai.responses":
		e.responses(doc)
	case "anthropic.messages":
		e.anthropic(doc)
	case "gemini":
		e.gemini(doc)
	case "bedrock.converse":
		e.bedrock(doc)
	}
	if e.est.CapField == "" && api != "openai.embeddings" {
		e.est.CapField, e.est.Cap = "default", defaultCap
	}
	e.est.Output = e.est.Cap * max(e.est.Choices, 1)
	return &e.est, nil
}

// apiOf recognises the API kind of a path, and the model a path names.
func apiOf(path string) (api, model string) {
	p, _, _ := strings.Cut(path, "?")
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		return "openai.chat", ""
	case strings.HasSuffix(p, "/completions"):
		return "openai.completions", ""
	case strings.HasSuffix(p, "/embeddings"):
		return "openai.embeddings", ""
	case strings.HasSuffix(p, "/responses"):
		return "openai.responses", ""
	case strings.HasSuffix(p, "/messages"):
		return "anthropic.messages", ""
	case strings.HasSuffix(p, ":generateContent"), strings.HasSuffix(p, ":streamGenerateContent"):
		m := p[:strings.LastIndexByte(p, ':')]
		return "gemini", m[strings.LastIndexByte(m, '/')+1:]
	case strings.HasSuffix(p, "/converse"), strings.HasSuffix(p, "/converse-stream"):
		m := strings.TrimSuffix(strings.TrimSuffix(p, "-stream"), "/converse")
		if i := strings.LastIndex(m, "/model/"); i >= 0 {
			return "bedrock.converse", m[i+len("/model/"):]
		}
		return "bedrock.converse", ""
	}
	return "", ""
}

// outputCap reads the first of fields that is a positive integer.
func (e *estimator) outputCap(doc gjson.Result, fields ...string) {
	for _, f := range fields {
		if v := doc.Get(f); v.Type == gjson.Number && v.Num >= 1 && v.Num == float64(int64(v.Num)) {
			e.est.CapField, e.est.Cap = f, int64(v.Num)
			return
		}
	}
}

func (e *estimator) choices(doc gjson.Result, fields ...string) {
	for _, f := range fields {
		if v := doc.Get(f); v.Type == gjson.Number && v.Num >= 1 && v.Num <= 128 {
			e.est.Choices = max(e.est.Choices, int64(v.Num))
		}
	}
}

func (e *estimator) chat(doc gjson.Result) {
	var overhead, count int64
	doc.Get("messages").ForEach(func(i, m gjson.Result) bool {
		count++
		overhead += estTokensPerMessage + estTokensPerRole
		role := m.Get("role").String()
		name := fmt.Sprintf("messages[%d] %s", i.Int(), role)
		if n := m.Get("name"); n.Type == gjson.String {
			overhead += estTokensPerName
			e.text(name+" name", n.Str)
		}
		e.openAIContent(name, m.Get("content"))
		for _, k := range []string{"tool_calls", "function_call", "refusal", "audio"} {
			if v := m.Get(k); v.Exists() && v.Type != gjson.Null {
				e.text(name+" "+k, v.Raw)
			}
		}
		return true
	})
	e.add("chat format", overhead+estReplyPriming, fmt.Sprintf("%d messages × %d, reply priming %d", count, estTokensPerMessage+estTokensPerRole, estReplyPriming))
	e.tools(doc, "tools", "functions")
	if f := doc.Get("response_format.json_schema"); f.Exists() {
		e.text("response_format", f.Raw)
	}
	e.outputCap(doc, "max_completion_tokens", "max_tokens")
	e.choices(doc, "n")
}

// openAIContent counts a content value: a string, or parts.
func (e *estimator) openAIContent(name string, c gjson.Result) {
	if c.Type == gjson.String {
		e.text(name+" text", c.Str)
		return
	}
	if !c.IsArray() {
		if c.Exists() && c.Type != gjson.Null {
			e.text(name+" content", c.Raw)
		}
		return
	}
	c.ForEach(func(_, part gjson.Result) bool {
		typ := part.Get("type").String()
		switch typ {
		case "text", "input_text", "output_text":
			e.text(name+" "+typ, part.Get("text").String())
		case "image_url":
			e.image(name+" image_url", part.Get("image_url.url").String(), part.Get("image_url.detail").String())
		case "input_image":
			e.image(name+" input_image", part.Get("image_url").String(), part.Get("detail").String())
		case "input_audio":
			a := part.Get("input_audio")
			e.audio(name+" input_audio", a.Get("format").String(), a.Get("data").String())
		case "file", "input_file":
			f := part
			if typ == "file" {
				f = part.Get("file")
			}
			e.file(name+" "+typ, f.Get("file_data").String(), f.Get("filename").String())
		default:
			e.text(name+" "+orUnknown(typ), part.Raw)
		}
		return true
	})
}

func orUnknown(typ string) string {
	if typ == "" {
		return "part"
	}
	return typ + " (counted as text)"
}

func (e *estimator) image(name, url, detail string) {
	w, h, sized := tokenizer.DataURLImageSize(url)
	d := detail
	if d == "" {
		d = "auto"
	}
	switch {
	case sized:
		d = fmt.Sprintf("detail %s, %d×%d", d, w, h)
	case strings.EqualFold(detail, "low"):
		d = "detail low"
	default:
		d = fmt.Sprintf("detail %s, unsized (URL): the most it can cost", d)
	}
	e.add(name, e.counter.ImageTokens(e.est.Model, detail, w, h), d)
}

func (e *estimator) audio(name, format, data string) {
	sec := tokenizer.AudioSecondsBase64(format, data)
	e.add(name, tokenizer.AudioTokens(e.est.Model, sec), fmt.Sprintf("%s, about %.1f s", orUnknownFormat(format), sec))
}

func orUnknownFormat(f string) string {
	if f == "" {
		return "unknown format"
	}
	return f
}

// file charges a file part from its data (a data URL or base64), or as
// unknown when the request only names it.
func (e *estimator) file(name, data, filename string) {
	if _, after, ok := strings.Cut(data, ";base64,"); ok && strings.HasPrefix(data, "data:") {
		data = after
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	detail := filename
	switch {
	case data == "":
		detail = "file_id only: content not in the request"
	case err != nil:
		raw = nil
		detail = "undecodable: charged as unknown"
	}
	e.add(name, tokenizer.FileTokens(e.counter, e.est.Model, raw), detail)
}

func (e *estimator) tools(doc gjson.Result, fields ...string) {
	for _, f := range fields {
		if v := doc.Get(f); v.IsArray() || v.IsObject() {
			n := len(v.Array())
			e.add(f, e.counter.CountTokens(e.est.Model, v.Raw), fmt.Sprintf("%d definition%s", n, plural(n)))
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (e *estimator) completions(doc gjson.Result) {
	e.prompt("prompt", doc.Get("prompt"))
	if v := doc.Get("suffix"); v.Type == gjson.String {
		e.text("suffix", v.Str)
	}
	e.outputCap(doc, "max_tokens")
	if e.est.CapField == "" {
		e.est.CapField, e.est.Cap = "max_tokens (API default)", estCompletionsCap
	}
	e.choices(doc, "n", "best_of")
}

func (e *estimator) embeddings(doc gjson.Result) {
	e.prompt("input", doc.Get("input"))
}

// prompt counts a prompt or embeddings input: a string, strings, or
// token arrays (whose length is their count).
func (e *estimator) prompt(name string, v gjson.Result) {
	switch {
	case v.Type == gjson.String:
		e.text(name, v.Str)
	case v.IsArray():
		v.ForEach(func(i, item gjson.Result) bool {
			n := fmt.Sprintf("%s[%d]", name, i.Int())
			switch {
			case item.Type == gjson.String:
				e.text(n, item.Str)
			case item.Type == gjson.Number:
				e.add(n, 1, "token id")
			case item.IsArray():
				e.add(n, int64(len(item.Array())), "token ids")
			}
			return true
		})
	}
}

func (e *estimator) responses(doc gjson.Result) {
	if v := doc.Get("instructions"); v.Type == gjson.String {
		e.add("instructions", estTokensPerMessage+e.counter.CountTokens(e.est.Model, v.Str), "")
	}
	input := doc.Get("input")
	switch {
	case input.Type == gjson.String:
		e.add("input", estTokensPerMessage+e.counter.CountTokens(e.est.Model, input.Str), "")
	case input.IsArray():
		input.ForEach(func(i, item gjson.Result) bool {
			name := fmt.Sprintf("input[%d] %s", i.Int(), item.Get("role").String())
			switch item.Get("type").String() {
			case "", "message":
				e.add(name+" message", estTokensPerMessage, "format overhead")
				e.openAIContent(name, item.Get("content"))
			case "item_reference":
				e.note("input item_reference: the referenced item is billed but not in the body")
			default:
				e.text(fmt.Sprintf("input[%d] %s", i.Int(), item.Get("type").String()), item.Raw)
			}
			return true
		})
	}
	e.tools(doc, "tools")
	if f := doc.Get("text.format"); f.IsObject() {
		e.text("text.format", f.Raw)
	}
	e.add("reply priming", estReplyPriming, "")
	if v := doc.Get("previous_response_id"); v.String() != "" {
		e.note("previous_response_id: the earlier conversation is billed as input again but is not in the body")
	}
	if v := doc.Get("conversation"); v.Exists() && v.Type != gjson.Null {
		e.note("conversation: its stored items are billed as input but are not in the body")
	}
	e.outputCap(doc, "max_output_tokens")
}

func (e *estimator) anthropic(doc gjson.Result) {
	if s := doc.Get("system"); s.Type == gjson.String {
		e.text("system", s.Str)
	} else if s.IsArray() {
		e.anthropicBlocks("system", s)
	}
	var count int64
	doc.Get("messages").ForEach(func(i, m gjson.Result) bool {
		count++
		name := fmt.Sprintf("messages[%d] %s", i.Int(), m.Get("role").String())
		if c := m.Get("content"); c.Type == gjson.String {
			e.text(name+" text", c.Str)
		} else {
			e.anthropicBlocks(name, c)
		}
		return true
	})
	e.add("message format", count*estTokensPerMessage, fmt.Sprintf("%d messages × %d (an approximation: Anthropic's is not published)", count, estTokensPerMessage))
	e.tools(doc, "tools")
	e.outputCap(doc, "max_tokens")
	if b := doc.Get("thinking.budget_tokens"); b.Exists() {
		e.note("thinking.budget_tokens is part of max_tokens, not added to it")
	}
}

func (e *estimator) anthropicBlocks(name string, blocks gjson.Result) {
	blocks.ForEach(func(_, b gjson.Result) bool {
		typ := b.Get("type").String()
		switch typ {
		case "text":
			e.text(name+" text", b.Get("text").String())
		case "thinking":
			e.text(name+" thinking", b.Get("thinking").String())
		case "image":
			src := b.Get("source")
			url := src.Get("url").String()
			if src.Get("type").String() == "base64" {
				url = "data:" + src.Get("media_type").String() + ";base64," + src.Get("data").String()
			}
			e.image(name+" image", url, "")
		case "document":
			src := b.Get("source")
			switch src.Get("type").String() {
			case "base64":
				e.file(name+" document", src.Get("data").String(), "")
			case "text":
				e.text(name+" document", src.Get("data").String())
			default:
				e.file(name+" document", "", "")
			}
		case "tool_result":
			if c := b.Get("content"); c.Type == gjson.String {
				e.text(name+" tool_result", c.Str)
			} else {
				e.anthropicBlocks(name+" tool_result", c)
			}
		default:
			e.text(name+" "+orUnknown(typ), b.Raw)
		}
		return true
	})
}

func (e *estimator) gemini(doc gjson.Result) {
	e.geminiParts("systemInstruction", doc.Get("systemInstruction.parts"))
	doc.Get("contents").ForEach(func(i, c gjson.Result) bool {
		e.geminiParts(fmt.Sprintf("contents[%d] %s", i.Int(), c.Get("role").String()), c.Get("parts"))
		return true
	})
	e.tools(doc, "tools")
	e.outputCap(doc, "generationConfig.maxOutputTokens")
	e.choices(doc, "generationConfig.candidateCount")
	if b := doc.Get("generationConfig.thinkingConfig.thinkingBudget"); b.Type == gjson.Number && b.Num > 0 {
		e.note(fmt.Sprintf("thinkingBudget %d: thinking is billed as output on top of the answer", b.Int()))
	}
}

func (e *estimator) geminiParts(name string, parts gjson.Result) {
	parts.ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.Get("text").Exists():
			e.text(name+" text", p.Get("text").String())
		case p.Get("inlineData").Exists():
			d := p.Get("inlineData")
			mime, data := d.Get("mimeType").String(), d.Get("data").String()
			switch {
			case strings.HasPrefix(mime, "image/"):
				e.image(name+" inlineData", "data:"+mime+";base64,"+data, "")
			case strings.HasPrefix(mime, "audio/"):
				e.audio(name+" inlineData", strings.TrimPrefix(mime, "audio/"), data)
			default:
				e.file(name+" inlineData", data, mime)
			}
		case p.Get("fileData").Exists():
			mime := p.Get("fileData.mimeType").String()
			if strings.HasPrefix(mime, "image/") {
				e.image(name+" fileData", "", "")
			} else {
				e.file(name+" fileData", "", mime)
			}
		default:
			e.text(name+" part", p.Raw)
		}
		return true
	})
}

func (e *estimator) bedrock(doc gjson.Result) {
	doc.Get("system").ForEach(func(_, s gjson.Result) bool {
		e.text("system", s.Get("text").String())
		return true
	})
	var count int64
	doc.Get("messages").ForEach(func(i, m gjson.Result) bool {
		count++
		name := fmt.Sprintf("messages[%d] %s", i.Int(), m.Get("role").String())
		m.Get("content").ForEach(func(_, c gjson.Result) bool {
			switch {
			case c.Get("text").Exists():
				e.text(name+" text", c.Get("text").String())
			case c.Get("image").Exists():
				url := "data:image/" + c.Get("image.format").String() + ";base64," + c.Get("image.source.bytes").String()
				e.image(name+" image", url, "")
			case c.Get("document").Exists():
				e.file(name+" document", c.Get("document.source.bytes").String(), c.Get("document.name").String())
			default:
				e.text(name+" block", c.Raw)
			}
			return true
		})
		return true
	})
	e.add("message format", count*estTokensPerMessage, fmt.Sprintf("%d messages × %d", count, estTokensPerMessage))
	if t := doc.Get("toolConfig"); t.IsObject() {
		e.text("toolConfig", t.Raw)
	}
	e.outputCap(doc, "inferenceConfig.maxTokens")
}

// printEstimate writes the breakdown as aligned text.
func printEstimate(w io.Writer, est *requestEstimate, counter *tokenizer.Counter, price accounting.Price) {
	m := counter.Method(est.Model)
	how := fmt.Sprintf("approximate (%s table, ×%.2f)", m.Profile, m.Scale)
	if m.Encoding != "" {
		how = "exact (" + m.Encoding + "; long unbroken stretches approximated)"
	}
	fmt.Fprintf(w, "api %s, model %s, tokenizer %s\n\n", est.API, est.Model, how)
	width := len("input total")
	for _, p := range est.Parts {
		width = max(width, len(p.Name))
	}
	fmt.Fprintf(w, "%-*s  %8s\n", width, "input", "tokens")
	for _, p := range est.Parts {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%-*s  %8d  %s", width, p.Name, p.Tokens, p.Detail), " "))
	}
	fmt.Fprintf(w, "%-*s  %8d\n", width, "input total", est.Input)
	fmt.Fprintln(w)
	if est.CapField == "" {
		fmt.Fprintln(w, "output: none (embeddings)")
	} else {
		fmt.Fprintf(w, "output cap: %d (%s) × %d choices = %d\n", est.Cap, est.CapField, max(est.Choices, 1), est.Output)
	}
	fmt.Fprintf(w, "reservation: %d tokens\n", est.Input+est.Output)
	if price.Input > 0 || price.Output > 0 {
		micro := price.EstimateCost(accounting.Estimate{InputTokens: est.Input, OutputTokens: est.Output})
		fmt.Fprintf(w, "cost: %d × $%.2f/M + %d × $%.2f/M = $%.6f\n", est.Input, price.Input, est.Output, price.Output, float64(micro)/1e6)
	} else {
		fmt.Fprintln(w, "cost: no price given (-price-input, -price-output)")
	}
	for _, n := range est.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}
