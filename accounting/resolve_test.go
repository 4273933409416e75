package accounting

import (
	"strings"
	"testing"
)

func TestResolvePrice(t *testing.T) {
	p := Prices{
		"gpt-4o":        {Input: 2.5, Output: 10},
		"gpt-4o-mini":   {Input: 0.15, Output: 0.6},
		"gpt-4o*":       {Input: 40, Output: 80},
		"gpt-4o-audio*": {Input: 100, Output: 200},
		"claude-*":      {Input: 3, Output: 15},
		DefaultModel:    {Input: 150, Output: 600},
	}
	tests := []struct {
		model   string
		wantKey string
		wantHow Resolution
	}{
		{"gpt-4o", "gpt-4o", ByName},
		// A dated snapshot is its family's: billed as gpt-4o.
		{"gpt-4o-2024-08-06", "gpt-4o", ByFamily},
		{"openai/gpt-4o-2024-08-06", "gpt-4o", ByFamily},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini", ByFamily},
		// Not a family: the longest pattern.
		{"gpt-4o-realtime-preview", "gpt-4o*", ByPattern},
		{"gpt-4o-audio-preview-2024-12-17", "gpt-4o-audio*", ByPattern},
		// A pattern matches the family too (Bedrock's spelling).
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-*", ByPattern},
		{"o1-pro", DefaultModel, ByDefault},
	}
	for _, tt := range tests {
		key, how := p.Resolve(tt.model)
		if key != tt.wantKey || how != tt.wantHow {
			t.Errorf("Resolve(%q): got %q (%v), want %q (%v)", tt.model, key, how, tt.wantKey, tt.wantHow)
		}
		pr, ok := p.Lookup(tt.model)
		if !ok || pr != p[tt.wantKey] {
			t.Errorf("Lookup(%q): got %+v, %v; want the %q entry", tt.model, pr, ok, tt.wantKey)
		}
	}
	delete(p, DefaultModel)
	if key, how := p.Resolve("o1-pro"); how != NoPrice || key != "" {
		t.Errorf("without a default: got %q (%v), want no price", key, how)
	}
	if _, ok := p.Lookup("o1-pro"); ok {
		t.Errorf("Lookup without a default: got a price")
	}
}

// TestGPT4oSnapshotBilledAsGPT4o pins that a dated snapshot costs what
// its family's entry says, to the micro-dollar.
func TestGPT4oSnapshotBilledAsGPT4o(t *testing.T) {
	p := Prices{"gpt-4o": {Input: 2.5, CachedInput: 1.25, Output: 10}, DefaultModel: {Input: 150, Output: 600}}
	pr, ok := p.Lookup("gpt-4o-2024-08-06")
	if !ok {
		t.Fatal("no price")
	}
	// 1000 in (400 cached), 200 out: 600×2.5 + 400×1.25 + 200×10 = 4000 µ$.
	if got := pr.UsageCost(Usage{InputTokens: 1000, CachedInputTokens: 400, OutputTokens: 200}); got != 4000 {
		t.Errorf("cost: got %d µ$, want 4000", got)
	}
}

func TestPriceKeys(t *testing.T) {
	tests := []struct {
		key  string
		want string // "" for valid
	}{
		{"gpt-4o", ""},
		{"gpt-4o*", ""},
		{"*", "models.*: a pattern of nothing; name the fallback default"},
		{"gpt-*-mini", "models.gpt-*-mini: '*' may only end a pattern"},
	}
	for _, tt := range tests {
		o := Options{Prices: Prices{tt.key: {Input: 1}}}
		err := o.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: got %v, want valid", tt.key, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: got %v, want %q", tt.key, err, tt.want)
		}
	}
}
