package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	geminiGenerate = "/v1beta/models/gemini-2.5-flash:generateContent"
	geminiStream   = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
)

// TestGeminiJSON covers generateContent.
func TestGeminiJSON(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name, body, output string
		wantOutput         int
		wantFinish         string
	}{
		{"stop", `{"contents":[]}`, "6", 6, "STOP"},
		{"max tokens", `{"contents":[],"generationConfig":{"maxOutputTokens":4}}`, "6", 4, "MAX_TOKENS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, geminiGenerate, c.body, map[string]string{hdrInputTokens: "20", hdrCachedTokens: "5", hdrOutputTokens: c.output})
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			m := decodeJSON(t, r.body)
			if m["modelVersion"] != "gemini-2.5-flash" {
				t.Errorf("modelVersion got %v, want the model from the path", m["modelVersion"])
			}
			cand := m["candidates"].([]any)[0].(map[string]any)
			if cand["finishReason"] != c.wantFinish {
				t.Errorf("finishReason got %v, want %s", cand["finishReason"], c.wantFinish)
			}
			if num(t, m, "usageMetadata", "promptTokenCount") != 20 || num(t, m, "usageMetadata", "cachedContentTokenCount") != 5 ||
				num(t, m, "usageMetadata", "candidatesTokenCount") != c.wantOutput {
				t.Errorf("usageMetadata got %v, want prompt 20 (5 cached), candidates %d", m["usageMetadata"], c.wantOutput)
			}
		})
	}
}

// checkGeminiChunks asserts cumulative usage snapshots, ending at the total,
// and the finish reason on the last chunk only.
func checkGeminiChunks(t *testing.T, chunks []map[string]any, wantChunks, wantOutput int) {
	t.Helper()
	if len(chunks) != wantChunks {
		t.Fatalf("got %d chunks, want %d", len(chunks), wantChunks)
	}
	prev := 0
	for i, c := range chunks {
		md := c["usageMetadata"].(map[string]any)
		got := 0
		if v, ok := md["candidatesTokenCount"]; ok {
			got = int(v.(float64))
		}
		if got < prev {
			t.Errorf("chunk %d: candidatesTokenCount %d fell below %d; snapshots are cumulative", i, got, prev)
		}
		prev = got
		_, hasFinish := c["candidates"].([]any)[0].(map[string]any)["finishReason"]
		if hasFinish != (i == len(chunks)-1) {
			t.Errorf("chunk %d: finishReason present %v, want only on the last", i, hasFinish)
		}
	}
	if prev != wantOutput {
		t.Errorf("last candidatesTokenCount %d, want %d", prev, wantOutput)
	}
}

// TestGeminiStream covers :streamGenerateContent as SSE (alt=sse, CRLF line
// ends, no [DONE]) and as a streamed JSON array.
func TestGeminiStream(t *testing.T) {
	srv := newTestServer(t)
	headers := map[string]string{hdrInputTokens: "20", hdrOutputTokens: "10", hdrChunks: "3"}

	t.Run("sse", func(t *testing.T) {
		r := call(t, srv, geminiStream+"?alt=sse", `{"contents":[]}`, headers)
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("content-type %q, want text/event-stream", r.header.Get("Content-Type"))
		}
		if !strings.Contains(r.body, "\r\n\r\n") || strings.Contains(r.body, "[DONE]") {
			t.Errorf("want CRLF-separated events and no [DONE]: %q", r.body)
		}
		var chunks []map[string]any
		for _, ev := range parseSSE(t, r.body) {
			var m map[string]any
			if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, m)
		}
		checkGeminiChunks(t, chunks, 3, 10)
	})

	t.Run("json array", func(t *testing.T) {
		r := call(t, srv, geminiStream, `{"contents":[]}`, headers)
		var chunks []map[string]any
		if err := json.Unmarshal([]byte(r.body), &chunks); err != nil {
			t.Fatalf("body is not a JSON array: %v\n%s", err, r.body)
		}
		checkGeminiChunks(t, chunks, 3, 10)
	})

	t.Run("cut", func(t *testing.T) {
		r := call(t, srv, geminiStream+"?alt=sse", `{"contents":[]}`, map[string]string{hdrChunks: "3", hdrCutAfter: "1"})
		if r.readErr == nil {
			t.Fatal("body read cleanly, want the connection dropped")
		}
		if n := strings.Count(r.body, "data: "); n != 1 || strings.Contains(r.body, "finishReason") {
			t.Errorf("got %d chunks (finishReason %v) before the cut, want 1 without finishReason", n, strings.Contains(r.body, "finishReason"))
		}
	})
}

// TestGeminiErrors covers Gemini's error shape and unknown methods.
func TestGeminiErrors(t *testing.T) {
	srv := newTestServer(t)
	checkErrorStatus(t, srv, geminiGenerate, `{}`, false, func(t *testing.T, status int, m map[string]any) {
		e, ok := m["error"].(map[string]any)
		if !ok || num(t, e, "code") != status || e["status"] == nil {
			t.Fatalf("status %d: body %v, want {error: {code, message, status}}", status, m)
		}
		if status == 429 {
			if e["status"] != "RESOURCE_EXHAUSTED" || !strings.Contains(toJSONString(e["details"]), "RetryInfo") {
				t.Errorf("429: got %v, want RESOURCE_EXHAUSTED with RetryInfo", e)
			}
		}
	})
	if r := call(t, srv, "/v1beta/models/gemini-2.5-flash:countTokens", `{}`, nil); r.status != 404 {
		t.Errorf("unknown method: status got %d, want 404", r.status)
	}
	if r := call(t, srv, geminiGenerate, `{"contents":`, nil); r.status != 400 {
		t.Errorf("bad JSON: status got %d, want 400", r.status)
	}
}

func toJSONString(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestGeminiEscapedPath checks a percent-encoded colon is the same call, as
// at Google's front end.
func TestGeminiEscapedPath(t *testing.T) {
	srv := newTestServer(t)
	for _, path := range []string{
		"/v1beta/models/gemini-2.0-flash%3AgenerateContent",
		"/v1beta/models/gemini-2.0-flash%3agenerateContent",
	} {
		r := call(t, srv, path, `{"contents":[]}`, map[string]string{hdrOutputTokens: "6"})
		if r.status != 200 {
			t.Errorf("%s: status got %d, want 200: %s", path, r.status, r.body)
			continue
		}
		if got := r.header.Get(hdrSeenModel); got != "gemini-2.0-flash" {
			t.Errorf("%s: %s got %q, want gemini-2.0-flash", path, hdrSeenModel, got)
		}
		if got := num(t, decodeJSON(t, r.body), "usageMetadata", "candidatesTokenCount"); got != 6 {
			t.Errorf("%s: candidatesTokenCount got %d, want 6", path, got)
		}
	}
}

// TestGeminiEmbed covers embedContent and batchEmbedContents: the Gemini
// API's shapes (testdata/gemini/embed.json, batch_embed.json), one
// embedding per request, and no usage.
func TestGeminiEmbed(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, "/v1beta/models/gemini-embedding-001:embedContent", `{"content":{"parts":[{"text":"hi"}]}}`, nil)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	m := decodeJSON(t, r.body)
	if e, ok := m["embedding"].(map[string]any); !ok || len(e["values"].([]any)) == 0 || m["usageMetadata"] != nil {
		t.Errorf("embedContent: got %s, want an embedding and no usage", r.body)
	}
	r = call(t, srv, "/v1beta/models/gemini-embedding-001:batchEmbedContents",
		`{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a"}]}},{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"b"}]}}]}`, nil)
	m = decodeJSON(t, r.body)
	if e, ok := m["embeddings"].([]any); r.status != 200 || !ok || len(e) != 2 {
		t.Errorf("batchEmbedContents: got %d %s, want two embeddings", r.status, r.body)
	}
	r = call(t, srv, "/v1beta/models/gemini-embedding-001:embedContent", `{}`, map[string]string{hdrStatus: "429"})
	if m := decodeJSON(t, r.body); r.status != 429 || m["error"].(map[string]any)["status"] != "RESOURCE_EXHAUSTED" {
		t.Errorf("a requested 429: got %d %s", r.status, r.body)
	}
}
