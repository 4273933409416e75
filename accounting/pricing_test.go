package accounting

import (
	"strings"
	"testing"
)

func TestUsageCost(t *testing.T) {
	tests := []struct {
		name  string
		price Price
		usage Usage
		want  int64 // micro-dollars
	}{
		{"plain", Price{Input: 0.15, Output: 0.60}, Usage{InputTokens: 1000, OutputTokens: 100}, 150 + 60},
		{"cached at the cached rate", Price{Input: 2.5, CachedInput: 1.25, Output: 10}, Usage{InputTokens: 1117, CachedInputTokens: 1024, OutputTokens: 46}, 1973}, // 93×2.5 + 1024×1.25 + 46×10 = 1972.5, rounded up,
		{"cache writes default to 1.25x and 2x", Price{Input: 3, Output: 15}, Usage{InputTokens: 300, CacheWriteTokens: 100, CacheWrite1hTokens: 100}, 100*3 + 100*3.75 + 100*6},
		{"zero", Price{Input: 1, Output: 1}, Usage{}, 0},
		{"rounds up", Price{Input: 0.1}, Usage{InputTokens: 1}, 1},
		{"float noise is not a micro-dollar", Price{Input: 0.15}, Usage{InputTokens: 1000}, 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.price.UsageCost(tt.usage); got != tt.want {
				t.Errorf("got %d µ$, want %d", got, tt.want)
			}
		})
	}
}

func TestCounterKeyEncoding(t *testing.T) {
	l := &Limit{Name: "pair", Scope: []string{"tenant", "user"}}
	tuples := []Attributes{
		{{Name: "tenant", Value: "a:b"}, {Name: "user", Value: "c"}},
		{{Name: "tenant", Value: "a"}, {Name: "user", Value: "b:c"}},
		{{Name: "tenant", Value: "a|b"}, {Name: "user", Value: ""}},
		{{Name: "tenant", Value: "1:a"}, {Name: "user", Value: "4:user"}},
		{{Name: "tenant", Value: "\x00\xff"}, {Name: "user", Value: "x"}},
		// Tuples that a separator-joined encoding would merge.
		{{Name: "tenant", Value: "a:4:user:1:b"}, {Name: "user", Value: "c"}},
		{{Name: "tenant", Value: "a"}, {Name: "user", Value: "b:4:user:1:c"}},
		{{Name: "tenant", Value: "a:user:b"}, {Name: "user", Value: "c"}},
		{{Name: "tenant", Value: "a"}, {Name: "user", Value: "b:user:c"}},
	}
	seen := map[string]int{}
	for i, a := range tuples {
		k := CounterKey(l, a)
		if j, dup := seen[k]; dup {
			t.Errorf("tuples %d and %d share key %q", j, i, k)
		}
		seen[k] = i
		if !strings.HasPrefix(k, KeyPrefix) {
			t.Errorf("key %q lacks the prefix", k)
		}
	}
	other := &Limit{Name: "pair", Scope: []string{"tenant", "user"}, Algorithm: TokenBucket}
	if CounterKey(l, tuples[0]) == CounterKey(other, tuples[0]) {
		t.Errorf("changing the algorithm keeps the key")
	}
}
