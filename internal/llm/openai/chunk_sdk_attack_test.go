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
	// The SDK takes the first of repeated members (its decoder finds
	// members with gjson); the reader takes the last usage object, the
	// last of repeated counts and the last details object, as JSON.parse
	// and Python's json do.
	"usage twice, the second lower":                    "repeated usage: the SDK reads the first",
	"a prompt count twice":                             "repeated count: the SDK reads the first",
	"a prompt count under both names":                  "the SDK reads prompt_tokens only",
	"details twice, the second without a cached count": "repeated details: the SDK reads the first",
	"details under both names":                         "the SDK reads prompt_tokens_details only",
	// The SDK reads a count in a string, or true, as a number; the
	// reader reads any count that is not a JSON number as zero.
	"counts as strings and other values": "the SDK reads \"100\" as 100 and true as 1",
	// The Responses API's usage, which the chat chunk type has no field for.
	"usage inside response": "the SDK's chunk has no response member",
	// Malformed JSON: the SDK refuses the event, gjson reads what it can.
	"a leading zero":   "malformed: the SDK refuses it",
	"a plus sign":      "malformed: the SDK refuses it",
	"a bare fraction":  "malformed: the SDK refuses it",
	"a vertical tab":   "malformed: the SDK refuses it",
	"a no-break space": "malformed: the SDK refuses it",
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
