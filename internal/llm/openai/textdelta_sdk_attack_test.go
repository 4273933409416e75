package openai

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"
)

// sdkTextDeltaDivergences are the text delta attacks whose text the
// official OpenAI Go SDK reads otherwise than the reader, with why.
var sdkTextDeltaDivergences = map[string]string{
	// The SDK takes the first of repeated members; the reader takes the
	// last delta and the last type (and so, after a second type, counts
	// nothing).
	"a second delta":             "repeated delta: the SDK reads the first",
	"a second type, error":       "repeated type: the SDK reads the first",
	"a second type, not a delta": "repeated type: the SDK reads the first",
	// The SDK refuses an event with a raw control byte in a string.
	"a delta with a raw control byte": "the SDK refuses a raw control byte",
}

// sdkTextDelta is the text of an output text delta as the SDK's stream
// event reads it.
func sdkTextDelta(ev []byte) (string, error) {
	var e responses.ResponseStreamEventUnion
	if err := json.Unmarshal(ev, &e); err != nil {
		return "", err
	}
	if e.Type != "response.output_text.delta" {
		return "", nil
	}
	return e.Delta, nil
}

// TestTextDeltaAttacksAsTheSDK: the text the reader counts of each text
// delta attack is the output text the official OpenAI Go SDK reads from
// it, but for the divergences listed in sdkTextDeltaDivergences, which
// must still diverge.
func TestTextDeltaAttacksAsTheSDK(t *testing.T) {
	for _, tc := range textDeltaAttacks {
		text, err := sdkTextDelta([]byte(tc.event))
		r := newResponsesReader()
		r.onEvent(sseEvent([]byte(tc.event)))
		same := r.ObservedOutputTokens() == fingerprints(text)
		why, listed := sdkTextDeltaDivergences[tc.name]
		switch {
		case !same && !listed:
			t.Errorf("%s: got %d observed, the SDK's text %q counts %d (its error: %v)", tc.name, r.ObservedOutputTokens(), text, fingerprints(text), err)
		case same && listed:
			t.Errorf("%s: got %d observed, as of the SDK's text %q, want it listed no longer (%s)", tc.name, r.ObservedOutputTokens(), text, why)
		}
	}
	for name := range sdkTextDeltaDivergences {
		found := false
		for _, tc := range textDeltaAttacks {
			found = found || tc.name == name
		}
		if !found {
			t.Errorf("sdkTextDeltaDivergences names %q, which is no text delta attack", name)
		}
	}
}
