package openai

import (
	"encoding/json"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// sdkDivergences are the chunk attacks whose usage the official OpenAI Go
// SDK reads otherwise than the reader, with why. Every path of the reader
// reads them alike (TestChunkAttacks); what differs is the general
// path's reading, which the fast path keeps.
var sdkDivergences = map[string]string{
	// Usage the reader finds unreadable, and reports none of, so that
	// settlement falls back, where the SDK reads counts: a repeated usage
	// object, count or details object (the SDK takes the first, its
	// decoder finding members with gjson; JSON.parse and Python's json
	// the last), a count that is not a non-negative JSON integer (the
	// SDK reads "100" as 100, true as 1, a fraction or a negative as
	// what it reads them as), details that are not an object.
	"usage twice, the second lower":                    "unreadable: usage twice; the SDK reads the first",
	"usage, then usage null":                           "unreadable: usage twice; the SDK reads the first",
	"usage, then usage without counts":                 "unreadable: usage twice; the SDK reads the first",
	"a prompt count twice":                             "unreadable: a count twice; the SDK reads the first",
	"a prompt count under both names":                  "unreadable: a count under both names; the SDK reads prompt_tokens",
	"a completion count under both names":              "unreadable: a count under both names; the SDK reads completion_tokens",
	"a cached count twice":                             "unreadable: a count twice; the SDK reads the first",
	"details twice, the second without a cached count": "unreadable: details twice; the SDK reads the first",
	"details under both names":                         "unreadable: details under both names; the SDK reads prompt_tokens_details",
	"fractions below one and small exponents":          "unreadable: fractions; the SDK rounds 10e-1 to 1",
	"a count of 400 digits, negative":                  "unreadable: a negative count; the SDK reads the other",
	"counts as strings and other values":               "unreadable: the SDK reads \"100\" as 100 and true as 1",
	"a prompt count as a string, alone":                "unreadable: the SDK reads \"100\" as 100",
	"a completion count of true":                       "unreadable: the SDK reads true as 1",
	"a count, then the same count null":                "unreadable: a count twice; the SDK reads the first",
	"details that are not an object":                   "unreadable: the SDK reads the counts beside them",
	// Usage under two members that differ: the chat SDK reads "usage",
	// a Groq or Responses client the other; the reader finds them
	// unreadable.
	"usage and Groq's usage, the second lower": "unreadable: two usages differ; the SDK reads usage",
	// The Responses API's usage, which the chat chunk type has no field for.
	"usage inside response":                            "the SDK's chunk has no response member",
	"usage inside response, then usage without counts": "the SDK's chunk has no response member, and reads usage's zeros",
}

// TestChunkAttacksAsTheSDK: the usage the reader takes from each chunk
// attack is what the official OpenAI Go SDK reads from it (its counts
// clamped as the reader clamps them; no usage and zero counts alike),
// but for the divergences listed in sdkDivergences, which must still
// diverge: a change that brings one into line is to be recorded there.
func TestChunkAttacksAsTheSDK(t *testing.T) {
	for _, tc := range chunkAttacks {
		var c oai.ChatCompletionChunk
		err := json.Unmarshal([]byte(tc.event), &c)
		sdk := accounting.Usage{
			InputTokens:       accounting.ClampTokens(c.Usage.PromptTokens),
			CachedInputTokens: accounting.ClampTokens(c.Usage.PromptTokensDetails.CachedTokens),
			OutputTokens:      accounting.ClampTokens(c.Usage.CompletionTokens),
		}.Clamp()
		r := newChunkReader()
		r.onEvent(sseEvent([]byte(tc.event)))
		got, _ := r.Usage()
		same := got == sdk
		why, listed := sdkDivergences[tc.name]
		switch {
		case !same && !listed:
			t.Errorf("%s: got usage %+v, the SDK %+v (its error: %v)", tc.name, got, sdk, err)
		case same && listed:
			t.Errorf("%s: got usage %+v, as the SDK does, want it listed no longer (%s)", tc.name, got, why)
		}
	}
	for name := range sdkDivergences {
		found := false
		for _, tc := range chunkAttacks {
			found = found || tc.name == name
		}
		if !found {
			t.Errorf("sdkDivergences names %q, which is no chunk attack", name)
		}
	}
}
