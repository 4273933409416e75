package accounting

import (
	"strings"
	"testing"
)

func TestModelFamily(t *testing.T) {
	tests := []struct{ model, want string }{
		{"gpt-4o-mini", "gpt-4o-mini"},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"o1-pro", "o1-pro"},
		{"o1-pro-2025-03-19", "o1-pro"},
		{"gpt-5-nano", "gpt-5-nano"},
		{"openai/gpt-4o", "gpt-4o"},
		{"ft:gpt-4o-mini-2024-07-18:acme::B2c", "gpt-4o-mini"},
		{"claude-3-5-sonnet-20241022", "claude-3-5-sonnet"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-3-5-sonnet-latest", "claude-3-5-sonnet"},
		{"claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet-v2"},
		{"anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		{"arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-pro-v1:0", "nova-pro"},
		{"gemini-2.0-flash-001", "gemini-2.0-flash"},
		{"gemini-2.5-pro", "gemini-2.5-pro"},
		{"llama-3.1-8b", "llama-3.1-8b"},
		{"gpt-3.5-turbo-0125", "gpt-3.5-turbo-0125"}, // not a date: kept
		{"my-model-2", "my-model-2"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := ModelFamily(tt.model); got != tt.want {
			t.Errorf("ModelFamily(%q): got %q, want %q", tt.model, got, tt.want)
		}
	}
}

func TestPricesByFamily(t *testing.T) {
	p := Prices{"gpt-4o-mini": {Input: 0.15}, "o1": {Input: 15}, DefaultModel: {Input: 150}}
	tests := []struct {
		model string
		want  float64
	}{
		{"gpt-4o-mini", 0.15},
		{"gpt-4o-mini-2024-07-18", 0.15},
		{"openai/gpt-4o-mini", 0.15},
		{"o1-2024-12-17", 15},
		{"o1-pro", 150}, // not o1's: a family is never another model
	}
	for _, tt := range tests {
		pr, ok := p.Lookup(tt.model)
		if !ok || pr.Input != tt.want {
			t.Errorf("Lookup(%q): got %v (%v), want input %v", tt.model, pr.Input, ok, tt.want)
		}
	}
}

func TestMatchByFamily(t *testing.T) {
	l := Limit{Name: "mini", Match: map[string]string{AttributeModel: "gpt-4o-mini"}}
	for _, m := range []string{"gpt-4o-mini", "gpt-4o-mini-2024-07-18"} {
		if !l.Applies(Attributes{{Name: AttributeModel, Value: ModelFamily(m)}}) {
			t.Errorf("%s: the limit matched to gpt-4o-mini does not apply", m)
		}
	}
	// A Limiter reads a snapshot in a match as its family.
	lim, err := New(Options{Store: nopStore{}, Limits: []Limit{{Name: "dated", Dimension: Requests, Algorithm: FixedWindow,
		Limit: 1, Window: 3600e9, Match: map[string]string{AttributeModel: "gpt-4o-mini-2024-07-18"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if dated := lim.Limits()[0]; !dated.Applies(Attributes{{Name: AttributeModel, Value: "gpt-4o-mini"}}) {
		t.Error("a limit matched to a snapshot does not apply to its family")
	}
	if l.Applies(Attributes{{Name: AttributeModel, Value: "gpt-4o"}}) {
		t.Error("a limit matched to gpt-4o-mini applies to gpt-4o")
	}
}

// nopStore is a Store for tests that never reach it.
type nopStore struct{ Store }

// TestBedrockPrefixesEndInADot: bedrockFamily skips its prefix search for
// a name without a dot, which is right only while every prefix has one.
func TestBedrockPrefixesEndInADot(t *testing.T) {
	for _, prefixes := range [][]string{bedrockRegions, bedrockVendors} {
		for _, p := range prefixes {
			if !strings.HasSuffix(p, ".") {
				t.Errorf("got Bedrock prefix %q, want one that ends in a dot", p)
			}
		}
	}
}
