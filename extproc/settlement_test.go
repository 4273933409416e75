package extproc

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

func TestSettlement(t *testing.T) {
	est := accounting.Estimate{InputTokens: 100, OutputTokens: 1000}
	reported := accounting.Usage{InputTokens: 90, CachedInputTokens: 50, OutputTokens: 20}
	reserved := accounting.Usage{InputTokens: 100, OutputTokens: 1000}
	tests := []struct {
		name      string
		o         outcome
		want      accounting.Usage
		wantBasis Basis
	}{
		{"not an LLM call", outcome{status: 200}, accounting.Usage{}, BasisRequest},
		{"usage reported", outcome{metered: true, status: 200, complete: true, hasUsage: true, usageFinal: true, usage: reported, streamed: true}, reported, BasisUsage},
		{"usage reported by a cut stream", outcome{metered: true, status: 200, hasUsage: true, usageFinal: true, usage: reported, observed: 5, streamed: true, bodySeen: true}, reported, BasisUsage},
		{"a running total of a cut stream", outcome{metered: true, status: 200, hasUsage: true, usage: reported, observed: 5, streamed: true, bodySeen: true}, reported, BasisUsage},
		{"usage wins over hidden reasoning", outcome{metered: true, status: 200, complete: true, hasUsage: true, usageFinal: true, usage: reported, hiddenReasoning: true}, reported, BasisUsage},
		{"a running total with hidden reasoning keeps the cap", outcome{metered: true, status: 200, hasUsage: true, usage: reported, hiddenReasoning: true, streamed: true, bodySeen: true},
			accounting.Usage{InputTokens: 90, CachedInputTokens: 50, OutputTokens: 1000}, BasisReserved},
		{"absurd usage is clamped", outcome{metered: true, status: 200, complete: true, hasUsage: true, usageFinal: true,
			usage: accounting.Usage{InputTokens: 1 << 62, CachedInputTokens: -4, OutputTokens: -1}},
			accounting.Usage{InputTokens: accounting.MaxTokens}, BasisUsage},
		{"upstream refused", outcome{metered: true, status: 429, complete: true}, accounting.Usage{}, BasisRefused},
		{"upstream failed", outcome{metered: true, status: 503, complete: true}, accounting.Usage{}, BasisRefused},
		{"no response at all", outcome{metered: true, observed: 0}, reserved, BasisReserved},
		{"Envoy's route timeout", outcome{metered: true, status: 504, origin: envoyAfterSend, complete: true}, reserved, BasisReserved},
		{"Envoy's reset after sending", outcome{metered: true, status: 503, origin: envoyAfterSend, complete: true}, reserved, BasisReserved},
		{"Envoy could not connect", outcome{metered: true, status: 503, origin: envoyNeverSent, complete: true}, accounting.Usage{}, BasisRefused},
		{"streamed, cut, no usage", outcome{metered: true, status: 200, streamed: true, observed: 40, bodySeen: true}, accounting.Usage{InputTokens: 100, OutputTokens: 40}, BasisEstimate},
		{"streamed, cut before any output", outcome{metered: true, status: 200, streamed: true, bodySeen: true}, accounting.Usage{InputTokens: 100}, BasisEstimate},
		// Envoy's 502 after an upstream reset while the headers were on
		// their way, or a client gone between the headers and the body.
		{"streamed, ended before any body", outcome{metered: true, status: 200, streamed: true}, reserved, BasisReserved},
		{"streamed, headers only, complete", outcome{metered: true, status: 200, streamed: true, complete: true}, accounting.Usage{InputTokens: 100}, BasisEstimate},
		{"streamed, complete, no usage", outcome{metered: true, status: 200, streamed: true, complete: true, observed: 40}, accounting.Usage{InputTokens: 100, OutputTokens: 40}, BasisEstimate},
		{"streamed, hidden reasoning, no usage", outcome{metered: true, status: 200, streamed: true, complete: true, observed: 2, hiddenReasoning: true}, reserved, BasisReserved},
		{"hidden reasoning observed past the cap", outcome{metered: true, status: 200, streamed: true, observed: 1500, hiddenReasoning: true, bodySeen: true},
			accounting.Usage{InputTokens: 100, OutputTokens: 1500}, BasisReserved},
		{"background", outcome{metered: true, status: 200, complete: true, background: true}, reserved, BasisReserved},
		{"unreadable encoding", outcome{metered: true, status: 200, complete: true, unreadable: true}, reserved, BasisReserved},
		{"non-streamed, cut", outcome{metered: true, status: 200, observed: 3}, reserved, BasisReserved},
		{"non-streamed, cut in or after its usage", outcome{metered: true, status: 200, hasUsage: true, usageFinal: true, usage: reported, observed: 3}, reserved, BasisReserved},
		{"non-streamed, complete, no usage", outcome{metered: true, status: 200, complete: true, observed: 30}, accounting.Usage{InputTokens: 100, OutputTokens: 30}, BasisEstimate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.estimate = est
			got, basis := settlement(tt.o)
			if got != tt.want || basis != tt.wantBasis {
				t.Errorf("got %+v on %q, want %+v on %q", got, basis, tt.want, tt.wantBasis)
			}
		})
	}
}

func TestMatchModel(t *testing.T) {
	tests := []struct {
		pattern, model string
		want           bool
	}{
		{"o1*", "o1", true},
		{"o1*", "o1-pro-2025-03-19", true},
		{"o1*", "gpt-4o1", false},
		{"gpt-5*", "gpt-5-mini", true},
		{"*mini*", "gpt-4o-mini-2024", true},
		{"*mini", "gpt-4o-mini", true},
		{"*mini", "gpt-4o-mini-x", false},
		{"a*b*c", "a-b-b-c", true},
		{"a*b*c", "a-c-b", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"*", "", true},
	}
	for _, tt := range tests {
		if got := tokenizer.MatchModel(tt.pattern, tt.model); got != tt.want {
			t.Errorf("MatchModel(%q, %q): got %v, want %v", tt.pattern, tt.model, got, tt.want)
		}
	}
}

func TestHiddenReasoningModels(t *testing.T) {
	s := &Server{reasoning: DefaultHiddenReasoningModels}
	for _, m := range []string{"o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-nano", "openai/o3", "gemini-2.5-pro", "gemini-3-flash", "grok-4",
		"ft:o4-mini-2025-04-16:acme::B2c", "ft:gpt-5-mini:acme:run:x"} {
		if !s.hiddenReasoning(m) {
			t.Errorf("%s: got no hidden reasoning, want it", m)
		}
	}
	for _, m := range []string{"gpt-4o-mini", "gpt-4.1", "claude-sonnet-4-5", "gemini-2.0-flash", "deepseek-reasoner", "llama-3.1-8b", "ft:gpt-4o-mini-2024-07-18:acme::x"} {
		if s.hiddenReasoning(m) {
			t.Errorf("%s: got hidden reasoning, want none", m)
		}
	}
}

func TestPriceFactor(t *testing.T) {
	tests := []struct {
		factors map[string]float64
		tier    string
		want    float64
	}{
		{nil, "", 1},
		{nil, "auto", 1},
		{nil, "default", 1},
		{nil, "priority", 2},
		{nil, "flex", 1},
		{nil, "turbo", 2}, // unknown: the dearest known
		{map[string]float64{"flex": 0.5}, "flex", 0.5},
		{map[string]float64{"flex": 0.5}, "priority", 1}, // unlisted: the dearest listed, never below standard
		{map[string]float64{"priority": 1.75, "flex": 0.5}, "priority", 1.75},
	}
	for _, tt := range tests {
		s := &Server{opts: Options{ServiceTierFactors: tt.factors}}
		if got := s.priceFactor(tt.tier); got != tt.want {
			t.Errorf("factors %v, tier %q: got %v, want %v", tt.factors, tt.tier, got, tt.want)
		}
	}
}
