package gemini

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, in both names of each field; counts that are
// not unambiguously non-negative integers, or are there twice, leave the
// usage unreadable.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	cases := []llmtest.Usage{
		{Name: "1e30", Body: `{"usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":5}}`,
			Want: accounting.Usage{InputTokens: huge, OutputTokens: 5}},
		{Name: "negative", Body: `{"usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":-5}}`, Unreadable: true},
		{Name: "every count huge", Body: `{"usage_metadata":{"prompt_token_count":1.5e308,"tool_use_prompt_token_count":9223372036854775808,"cached_content_token_count":1e400,"candidates_token_count":1e30,"thoughts_token_count":1e30}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "integers with exponents", Body: `{"usageMetadata":{"promptTokenCount":10.0,"cachedContentTokenCount":2e0,"candidatesTokenCount":3}}`,
			Want: accounting.Usage{InputTokens: 10, CachedInputTokens: 2, OutputTokens: 3}},
		{Name: "fractions", Body: `{"usageMetadata":{"promptTokenCount":10.9,"cachedContentTokenCount":2.5,"candidatesTokenCount":3.99}}`, Unreadable: true},
		{Name: "a count as a string", Body: `{"usageMetadata":{"promptTokenCount":10,"thoughtsTokenCount":"7"}}`, Unreadable: true},
		{Name: "a count of true", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":true}}`, Unreadable: true},
		{Name: "a leading zero", Body: `{"usageMetadata":{"promptTokenCount":00,"candidatesTokenCount":5}}`, Unreadable: true},
		{Name: "a plus sign", Body: `{"usageMetadata":{"promptTokenCount":+100,"candidatesTokenCount":5}}`, Unreadable: true},
		{Name: "a bare fraction", Body: `{"usageMetadata":{"promptTokenCount":.5,"candidatesTokenCount":5}}`, Unreadable: true},
		{Name: "a count twice", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5,"promptTokenCount":0}}`, Unreadable: true},
		{Name: "a count under both names", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5,"prompt_token_count":0}}`, Unreadable: true},
		{Name: "usageMetadata twice", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5},"usageMetadata":{"promptTokenCount":0}}`, Unreadable: true},
		{Name: "usageMetadata twice, the first under an escaped name", Body: `{"usage\u004detadata":{"promptTokenCount":1000,"candidatesTokenCount":1000},` +
			`"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`, Unreadable: true},
		{Name: "usageMetadata under an escaped name", Body: `{"usage\u004detadata":{"promptTokenCount":100,"candidatesTokenCount":5}}`,
			Want: accounting.Usage{InputTokens: 100, OutputTokens: 5}},
		{Name: "usageMetadata under both names", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5},"usage_metadata":{}}`, Unreadable: true},
	}
	llmtest.CheckUsage(t, GenerateContent{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\r\n\r\n"
	}
	llmtest.CheckUsage(t, GenerateContent{}, "text/event-stream", cases)
}

// TestModalityUsage: the AUDIO part of the prompt and the AUDIO and IMAGE
// parts of the candidates are read from the modality details, summed per
// modality and kept within the counts they are part of.
func TestModalityUsage(t *testing.T) {
	cases := []llmtest.Usage{
		{Name: "audio in, image out", Body: `{"usageMetadata":{"promptTokenCount":500,"candidatesTokenCount":1300,` +
			`"promptTokensDetails":[{"modality":"TEXT","tokenCount":20},{"modality":"AUDIO","tokenCount":480}],` +
			`"candidatesTokensDetails":[{"modality":"IMAGE","tokenCount":1290},{"modality":"TEXT","tokenCount":10}]}}`,
			Want: accounting.Usage{InputTokens: 500, AudioInputTokens: 480, OutputTokens: 1300, ImageOutputTokens: 1290}},
		{Name: "proto names, audio out, repeated modality", Body: `{"usage_metadata":{"prompt_token_count":10,"candidates_token_count":100,` +
			`"candidates_tokens_details":[{"modality":"AUDIO","token_count":60},{"modality":"AUDIO","token_count":30}]}}`,
			Want: accounting.Usage{InputTokens: 10, OutputTokens: 100, AudioOutputTokens: 90}},
		{Name: "details beyond the counts", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,` +
			`"promptTokensDetails":[{"modality":"AUDIO","tokenCount":1e30}],` +
			`"candidatesTokensDetails":[{"modality":"IMAGE","tokenCount":1e30},{"modality":"IMAGE","tokenCount":1e30}]}}`,
			Want: accounting.Usage{InputTokens: 10, AudioInputTokens: 10, OutputTokens: 5, ImageOutputTokens: 5}},
		{Name: "details of null", Body: `{"usageMetadata":{"promptTokenCount":10,"promptTokensDetails":null}}`,
			Want: accounting.Usage{InputTokens: 10}},
		{Name: "details not a list", Body: `{"usageMetadata":{"promptTokenCount":10,"promptTokensDetails":{"modality":"AUDIO"}}}`, Unreadable: true},
		{Name: "details a number", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokensDetails":7}}`, Unreadable: true},
		{Name: "details of the wrong shape", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokensDetails":[7]}}`, Unreadable: true},
		{Name: "a detail count twice", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":100,` +
			`"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":60,"token_count":0}]}}`, Unreadable: true},
		{Name: "a modality twice", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5,` +
			`"promptTokensDetails":[{"modality":"TEXT","modality":"AUDIO","tokenCount":100}]}}`, Unreadable: true},
		{Name: "a detail count as a string", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":100,` +
			`"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":"60"}]}}`, Unreadable: true},
	}
	llmtest.CheckUsage(t, GenerateContent{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\r\n\r\n"
	}
	llmtest.CheckUsage(t, GenerateContent{}, "text/event-stream", cases)
}

// readMetadataGJSON is ReadMetadata as gjson reads it, the way it was
// written before readMetadataRaw: FuzzReadMetadata holds the two alike.
func readMetadataGJSON(u gjson.Result) (m Metadata, present, readable bool) {
	if !u.IsObject() {
		return m, false, true
	}
	if !llm.WellFormedObject(llm.BytesView(u.Raw)) {
		return Metadata{}, false, false
	}
	readable = true
	var seen [7]bool
	u.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		var slot int
		switch k.Str {
		case "promptTokenCount", "prompt_token_count":
			dst, slot = &m.Prompt, 0
		case "cachedContentTokenCount", "cached_content_token_count":
			dst, slot = &m.Cached, 1
		case "candidatesTokenCount", "candidates_token_count":
			dst, slot = &m.Candidates, 2
		case "thoughtsTokenCount", "thoughts_token_count":
			dst, slot = &m.Thoughts, 3
		case "toolUsePromptTokenCount", "tool_use_prompt_token_count":
			dst, slot = &m.ToolPrompt, 4
		case "promptTokensDetails", "prompt_tokens_details":
			slot = 5
		case "candidatesTokensDetails", "candidates_tokens_details":
			slot = 6
		default:
			return true
		}
		if seen[slot] {
			readable = false
			return false
		}
		seen[slot] = true
		switch slot {
		case 5:
			m.AudioPrompt, _, readable = modalityCountsGJSON(v, "AUDIO", "")
		case 6:
			m.AudioCandidates, m.ImageCandidates, readable = modalityCountsGJSON(v, "AUDIO", "IMAGE")
		default:
			*dst, readable = llm.ReadCount(v)
		}
		return readable
	})
	if !readable {
		return Metadata{}, true, false
	}
	return m, true, true
}

func modalityCountsGJSON(list gjson.Result, a, b string) (na, nb int64, ok bool) {
	if list.Type == gjson.Null {
		return 0, 0, true
	}
	if !list.IsArray() {
		return 0, 0, false
	}
	ok = true
	list.ForEach(func(_, e gjson.Result) bool {
		if !e.IsObject() {
			ok = false
			return false
		}
		var n int64
		var modality gjson.Result
		counts, modalities := 0, 0
		e.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "tokenCount", "token_count":
				counts++
				n, ok = llm.ReadCount(v)
			case "modality":
				modalities++
				modality = v
			}
			return ok && counts < 2 && modalities < 2
		})
		if !ok || counts > 1 || modalities > 1 {
			ok = false
			return false
		}
		switch modality.Str {
		case a:
			na = accounting.ClampTokens(na + n)
		case b:
			nb = accounting.ClampTokens(nb + n)
		}
		return true
	})
	if !ok {
		return 0, 0, false
	}
	return na, nb, true
}

// FuzzReadMetadata holds ReadMetadata, which reads with the scanner, to
// gjson's reading of the same usageMetadata object.
func FuzzReadMetadata(f *testing.F) {
	for _, s := range []string{
		`{"promptTokenCount":5,"candidatesTokenCount":3,"totalTokenCount":8}`,
		`{"prompt_token_count":5,"promptTokensDetails":[{"modality":"TEXT","tokenCount":3},{"modality":"AUDIO","tokenCount":2}]}`,
		`{"candidatesTokensDetails":[{"modality":"IMAGE","token_count":1e3},{"modality":"AUDIO"}],"thoughtsTokenCount":1}`,
		`{"promptTokensDetails":[{"modality":"TEXT","modality":"AUDIO","tokenCount":1}]}`,
		`{"promptTokensDetails":[{"modality":"AU\u0044IO","tokenCount":1}],"promptTokensDetails":null}`,
		`{"promptTokenCount":"5","candidatesTokenCount":-1,"cachedContentTokenCount":00}`,
		`{"promptTokenCount":1,"promptTokenCount":2}`,
		`{"promptTokensDetails":[7],"candidatesTokensDetails":{}}`,
		`{"promptTokenCount":1 "x":2}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u := gjson.Parse(s)
		m, p, r := ReadMetadata(u)
		gm, gp, gr := readMetadataGJSON(u)
		if r != gr || r && (m != gm || p != gp) {
			t.Fatalf("%q: ReadMetadata got %+v present %v readable %v, gjson %+v %v %v", s, m, p, r, gm, gp, gr)
		}
	})
}
