package openai

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, in JSON bodies and streams alike.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	cases := []llmtest.Usage{
		{Name: "1e30", Body: `{"usage":{"prompt_tokens":1e30,"completion_tokens":5}}`,
			Want: accounting.Usage{InputTokens: huge, OutputTokens: 5}},
		{Name: "negative", Body: `{"usage":{"prompt_tokens":1e30,"completion_tokens":-5}}`, Unreadable: true},
		{Name: "beyond float64 and int64", Body: `{"usage":{"prompt_tokens":1.5e308,"completion_tokens":9223372036854775808,"prompt_tokens_details":{"cached_tokens":1e400}}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "a fraction written with an exponent", Body: `{"usage":{"input_tokens":10.0,"output_tokens":25e-1,"input_tokens_details":{"cached_tokens":3E0}}}`,
			Unreadable: true},
		{Name: "integers with exponents", Body: `{"usage":{"input_tokens":10.0,"output_tokens":2.5e1,"input_tokens_details":{"cached_tokens":3E0}}}`,
			Want: accounting.Usage{InputTokens: 10, CachedInputTokens: 3, OutputTokens: 25}},
		{Name: "fractions", Body: `{"usage":{"input_tokens":10.9,"output_tokens":2,"input_tokens_details":{"cached_tokens":3}}}`, Unreadable: true},
		{Name: "a fraction in the details", Body: `{"usage":{"input_tokens":10,"output_tokens":2,"input_tokens_details":{"cached_tokens":3.99}}}`, Unreadable: true},
		{Name: "strings", Body: `{"usage":{"prompt_tokens":"12","completion_tokens":5}}`, Unreadable: true},
		{Name: "true", Body: `{"usage":{"prompt_tokens":12,"completion_tokens":true}}`, Unreadable: true},
		{Name: "null", Body: `{"usage":{"prompt_tokens":12,"completion_tokens":null}}`,
			Want: accounting.Usage{InputTokens: 12}},
		{Name: "a count, then the same count null", Body: `{"usage":{"prompt_tokens":12,"completion_tokens":5,"completion_tokens":null}}`, Unreadable: true},
		{Name: "null detail counts, as DashScope and Dynamo send them", Body: `{"usage":{"prompt_tokens":196,"completion_tokens":30,"total_tokens":226,` +
			`"completion_tokens_details":{"accepted_prediction_tokens":null,"audio_tokens":null,"reasoning_tokens":0},"prompt_tokens_details":{"audio_tokens":null,"cached_tokens":192}}}`,
			Want: accounting.Usage{InputTokens: 196, CachedInputTokens: 192, OutputTokens: 30}},
		{Name: "a leading zero", Body: `{"usage":{"prompt_tokens":00,"completion_tokens":5}}`, Unreadable: true},
		{Name: "a bare fraction", Body: `{"usage":{"prompt_tokens":.5,"completion_tokens":5}}`, Unreadable: true},
		{Name: "a plus sign", Body: `{"usage":{"prompt_tokens":+100,"completion_tokens":5}}`, Unreadable: true},
		{Name: "a count twice", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens":0}}`, Unreadable: true},
		{Name: "a count under both names", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":5,"input_tokens":0}}`, Unreadable: true},
		{Name: "details twice", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{}}}`, Unreadable: true},
		{Name: "a cached count twice", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":90}}}`, Unreadable: true},
		{Name: "details not an object", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":[]}}`, Unreadable: true},
		{Name: "details null", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":null}}`,
			Want: accounting.Usage{InputTokens: 100, OutputTokens: 5}},
		{Name: "usage twice", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":50},"usage":{"prompt_tokens":0,"completion_tokens":0}}`, Unreadable: true},
		{Name: "usage, then usage null", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":50},"usage":null}`, Unreadable: true},
		{Name: "cached above input", Body: `{"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":1e30}}}`,
			Want: accounting.Usage{InputTokens: 5, CachedInputTokens: 5, OutputTokens: 1}},
	}
	llmtest.CheckUsage(t, Chat{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\n\ndata: [DONE]\n\n"
	}
	llmtest.CheckUsage(t, Chat{}, "text/event-stream", cases)
}

// TestNullCountsInStreams: a stream whose usage chunks carry a null
// count before the last, as Databricks sends them, settles on the last.
func TestNullCountsInStreams(t *testing.T) {
	const head = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",`
	cases := []llmtest.Usage{
		{Name: "null, then the count", Body: head + `"choices":[{"index":0,"delta":{"content":"hi"}}],` +
			`"usage":{"cache_read_input_tokens":0,"completion_tokens":null,"prompt_tokens":9,"total_tokens":null}}` + "\n\n" +
			head + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],` +
			`"usage":{"cache_read_input_tokens":0,"completion_tokens":16,"prompt_tokens":9,"total_tokens":25}}` + "\n\ndata: [DONE]\n\n",
			Want: accounting.Usage{InputTokens: 9, OutputTokens: 16}},
		{Name: "the count, then a chunk with both null", Body: head + `"choices":[],"usage":{"completion_tokens":16,"prompt_tokens":9}}` + "\n\n" +
			head + `"choices":[],"usage":{"completion_tokens":null,"prompt_tokens":null}}` + "\n\ndata: [DONE]\n\n",
			Want: accounting.Usage{InputTokens: 9, OutputTokens: 16}},
	}
	llmtest.CheckUsage(t, Chat{}, "text/event-stream", cases)
}

// TestAudioUsage: audio tokens are read as parts of the prompt and the
// completion, within them, in JSON bodies and streams alike.
func TestAudioUsage(t *testing.T) {
	cases := []llmtest.Usage{
		{Name: "chat audio", Body: `{"usage":{"prompt_tokens":120,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":20,"audio_tokens":80},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":250}}}`,
			Want: accounting.Usage{InputTokens: 120, CachedInputTokens: 20, AudioInputTokens: 80, OutputTokens: 300, AudioOutputTokens: 250}},
		{Name: "audio above what is left", Body: `{"usage":{"prompt_tokens":100,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":90,"audio_tokens":50},"completion_tokens_details":{"audio_tokens":1e30}}}`,
			Want: accounting.Usage{InputTokens: 100, CachedInputTokens: 90, AudioInputTokens: 10, OutputTokens: 10, AudioOutputTokens: 10}},
	}
	llmtest.CheckUsage(t, Chat{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\n\ndata: [DONE]\n\n"
	}
	llmtest.CheckUsage(t, Chat{}, "text/event-stream", cases)
}

// FuzzUsageRaw holds readUsageRaw, the fast paths' reading of a usage
// object, to readUsage, gjson's, on every well-formed object: the same
// usage, present and readable alike.
func FuzzUsageRaw(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":5,"completion_tokens":3}`,
		`{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2,"audio_tokens":1}}`,
		`{"input_tokens":5,"output_tokens":2,"output_tokens_details":{"audio_tokens":1,"reasoning_tokens":1}}`,
		`{"prompt_tokens":5,"prompt_tokens":0}`,
		`{"prompt_tokens":5,"input_tokens":0}`,
		`{"prompt_tokens":"5","completion_tokens":true}`,
		`{"prompt_tokens":1e3,"completion_tokens":1.5}`,
		`{"prompt_tokens":5,"prompt_tokens_details":null,"completion_tokens_details":[]}`,
		`{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}`,
		`{"completion_tokens_details":{"cached_tokens":"x"},"completion_tokens":-0}`,
		`{"total_tokens":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, u []byte) {
		if !llm.WellFormedObject(u) {
			return
		}
		gu, gp, gr := readUsage(gjson.Parse(llm.View(u)))
		ru, rp, rr := readUsageRaw(u)
		if gr != rr || gr && (gu != ru || gp != rp) {
			t.Fatalf("%q: readUsage got %+v present %v readable %v, readUsageRaw %+v %v %v", u, gu, gp, gr, ru, rp, rr)
		}
	})
}
