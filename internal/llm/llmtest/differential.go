package llmtest

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Provider is what a provider will do with a request body: the figures a
// reservation must agree with.
type Provider struct {
	Model  string
	Stream bool
	// StreamUsage reports that the response will report its usage.
	StreamUsage bool
	// OutputCap is the most output per choice the provider generates, as
	// the body sets it (for OpenAI's chat, the larger of its two cap
	// fields: servers read one or the other); zero when the body sets
	// none, or for an API without output.
	OutputCap int64
	// Choices is how many completions it generates and bills.
	Choices         int64
	HiddenReasoning bool
	Background      bool
	// TextRunes is the number of characters of prompt text the provider
	// reads from the body, at least: the estimate, made with a counter of
	// one token per character, must not be below it.
	TextRunes int64
}

// View is a provider's reading of a request body sent to path, the body
// decoded as encoding/json decodes it: objects as map[string]any, numbers
// as json.Number, the last of repeated keys kept. ok is false when the
// provider refuses the body, which then costs nothing. A View is written
// from the provider's documentation, apart from the wire format it
// checks, so that the two can disagree.
type View func(path string, body map[string]any) (p Provider, ok bool)

// DiffOptions are the parse options of the differential check: a counter
// of one token per character, so that TextRunes is a lower bound of the
// estimate, and the usual default cap.
func DiffOptions() llm.ParseOptions {
	return llm.ParseOptions{Counter: Chars{PerToken: 1}, DefaultOutputCap: 4096}
}

// CheckDifferential checks, for a body sent to path, that what
// target.API reserves is what target.View says the provider will do. The
// API may refuse the body (a refusal costs nothing); if it accepts it,
// Inject must accept it too, its edit must keep the body one that the API
// accepts, and the provider's reading of the edited body must agree with
// the Request on the model, the stream and its usage report, the output
// cap, the choices, hidden reasoning and background mode, and must not
// hold more prompt text than the estimate counts.
func CheckDifferential(t *testing.T, target RequestTarget, path string, body []byte, opts llm.ParseOptions) {
	t.Helper()
	api := target.API
	req, err := api.ParseRequest(path, body, opts)
	if err != nil {
		return
	}
	edited, err := api.Inject(body, &req, llm.InjectOptions{OutputCap: true, StreamUsage: true})
	if err != nil {
		t.Fatalf("%s: Inject failed on a body that parsed: %v\n%s", api.Name(), err, body)
	}
	if edited == nil {
		edited = body
	}
	// The edit is one the API reads back as given.
	again, err := api.ParseRequest(path, edited, opts)
	if err != nil {
		t.Fatalf("%s: the edited body is refused: %v\n%s", api.Name(), err, edited)
	}
	if again.OutputCap != req.OutputCap || again.Model != req.Model || again.Choices != req.Choices || again.Stream != req.Stream {
		t.Fatalf("%s: the edited body reads as %+v, the body as %+v\n%s", api.Name(), again, req, edited)
	}
	decoded, err := Decode(edited)
	if err != nil {
		t.Fatalf("%s: encoding/json cannot read a body the API accepted: %v\n%s", api.Name(), err, edited)
	}
	p, ok := target.View(path, decoded)
	if !ok {
		return
	}
	want := Provider{
		Model: req.Model, Stream: req.Stream, StreamUsage: p.StreamUsage, OutputCap: req.OutputCap, Choices: req.Choices,
		HiddenReasoning: req.HiddenReasoning, Background: req.Background, TextRunes: p.TextRunes,
	}
	if req.Stream {
		// Asked to, Inject makes every stream report its usage.
		want.StreamUsage = true
	}
	if p != want {
		t.Fatalf("%s: the provider reads\n  %+v\nthe reservation assumed\n  %+v\nbody:   %s\nedited: %s", api.Name(), p, want, body, edited)
	}
	if req.InputTokens < p.TextRunes {
		t.Fatalf("%s: estimated %d input tokens for %d characters of prompt the provider reads\n%s", api.Name(), req.InputTokens, p.TextRunes, body)
	}
}

// Decode decodes body as a provider written with encoding/json does:
// objects as map[string]any, numbers as json.Number, so that a number
// beyond float64 is kept as written. It fails for a body that is not one
// JSON object.
func Decode(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, &json.SyntaxError{}
	}
	return m, nil
}

// The helpers below read a decoded body as providers do: a field that is
// absent or null has its default, one of the wrong type is refused (ok
// false), so that a View is a few lines per field.

// Get returns the value at path in v, following objects; nil when a
// field on the way is absent, null or not an object.
func Get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// OptionalInt reads an integer: def for nil; a number with an integral
// value, however written (1e3 and 64.0 are integers to Python providers,
// which read JSON numbers as floats and accept whole ones); anything
// else, and a number beyond float64 (1e309, which Python reads as
// infinity), is refused.
func OptionalInt(v any, def int64) (int64, bool) {
	if v == nil {
		return def, true
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

// OptionalBool reads a flag: false for nil.
func OptionalBool(v any) (value, ok bool) {
	if v == nil {
		return false, true
	}
	b, ok := v.(bool)
	return b, ok
}

// OptionalString reads a string: "" for nil.
func OptionalString(v any) (string, bool) {
	if v == nil {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
}

// OptionalObject reads an object: nil for nil.
func OptionalObject(v any) (map[string]any, bool) {
	if v == nil {
		return nil, true
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// Runes returns the number of characters in v, a string, or zero.
func Runes(v any) int64 {
	s, _ := v.(string)
	return int64(utf8.RuneCountInString(s))
}
