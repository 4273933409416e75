package anthropic

import (
	"encoding/json"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// sdkDeltaDivergences are the delta attacks whose text the official
// Anthropic Go SDK reads otherwise than the reader, with why.
var sdkDeltaDivergences = map[string]string{
	// The SDK refuses an event with a raw control byte in a string, or
	// with anything after the object; every path of the reader reads it
	// as gjson does.
	"a text with a raw control byte":               "the SDK refuses a raw control byte",
	"a text with a raw control byte and an escape": "the SDK refuses a raw control byte",
	"an error event after":                         "the SDK refuses a second object",
	// The SDK reads a text that is not a string as its raw JSON; the
	// reader counts no text of it.
	"a text not a string": "the SDK reads [\"a\"] as the text",
}

// sdkText is the text of a content_block_delta as the SDK's stream event
// reads it: the member its delta type names.
func sdkText(ev []byte) (string, error) {
	var e sdk.MessageStreamEventUnion
	if err := json.Unmarshal(ev, &e); err != nil {
		return "", err
	}
	if e.Type != "content_block_delta" {
		return "", nil
	}
	switch e.Delta.Type {
	case "text_delta":
		return e.Delta.Text, nil
	case "thinking_delta":
		return e.Delta.Thinking, nil
	case "input_json_delta":
		return e.Delta.PartialJSON, nil
	}
	return "", nil
}

// TestDeltaAttacksAsTheSDK: the text the reader counts of each delta
// attack is the text the official Anthropic Go SDK reads from it, but for
// the divergences listed in sdkDeltaDivergences, which must still
// diverge.
func TestDeltaAttacksAsTheSDK(t *testing.T) {
	for _, tc := range deltaAttacks {
		text, err := sdkText([]byte(tc.event))
		r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}})
		r.readEvent([]byte(tc.event), true)
		same := r.ObservedOutputTokens() == fingerprints(text)
		why, listed := sdkDeltaDivergences[tc.name]
		switch {
		case !same && !listed:
			t.Errorf("%s: got %d observed, the SDK's text %q counts %d (its error: %v)", tc.name, r.ObservedOutputTokens(), text, fingerprints(text), err)
		case same && listed:
			t.Errorf("%s: got %d observed, as of the SDK's text %q, want it listed no longer (%s)", tc.name, r.ObservedOutputTokens(), text, why)
		}
	}
	for name := range sdkDeltaDivergences {
		found := false
		for _, tc := range deltaAttacks {
			found = found || tc.name == name
		}
		if !found {
			t.Errorf("sdkDeltaDivergences names %q, which is no delta attack", name)
		}
	}
}
