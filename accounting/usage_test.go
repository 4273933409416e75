package accounting

import (
	"math"
	"testing"
)

func TestClampTokens(t *testing.T) {
	tests := []struct{ n, want int64 }{
		{-5, 0}, {0, 0}, {7, 7}, {MaxTokens, MaxTokens}, {MaxTokens + 1, MaxTokens}, {math.MaxInt64, MaxTokens}, {math.MinInt64, 0},
	}
	for _, tt := range tests {
		if got := ClampTokens(tt.n); got != tt.want {
			t.Errorf("ClampTokens(%d): got %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestUsageClampAndTotal(t *testing.T) {
	u := Usage{InputTokens: math.MaxInt64, CachedInputTokens: math.MaxInt64, CacheWriteTokens: 5, OutputTokens: math.MaxInt64}
	// gjson reads 1e30 as MaxInt64: adding two of them overflowed into a
	// negative total, which a Prometheus counter panics on.
	if got := u.Total(); got != MaxTokens {
		t.Errorf("Total: got %d, want %d (saturated)", got, int64(MaxTokens))
	}
	c := u.Clamp()
	if want := (Usage{InputTokens: MaxTokens, CachedInputTokens: MaxTokens, OutputTokens: MaxTokens}); c != want {
		t.Errorf("Clamp: got %+v, want %+v (parts never above the input)", c, want)
	}
	if got := (Usage{InputTokens: -3, OutputTokens: -4}).Clamp(); got != (Usage{}) {
		t.Errorf("Clamp of negative counts: got %+v, want zeros", got)
	}
	e := Estimate{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}
	if got := e.Total(); got != MaxTokens {
		t.Errorf("Estimate.Total: got %d, want %d", got, int64(MaxTokens))
	}
	if got := (Price{Input: 1e9, Output: 1e9}).UsageCost(c); got != MaxCost {
		t.Errorf("UsageCost of an absurd usage: got %d, want the saturated %d", got, int64(MaxCost))
	}
}

func TestUsageWithin(t *testing.T) {
	bound := Usage{InputTokens: 1000, OutputTokens: 100}
	tests := []struct {
		name       string
		u, want    Usage
		wantBeyond bool
	}{
		{"within", Usage{InputTokens: 900, CachedInputTokens: 800, OutputTokens: 100},
			Usage{InputTokens: 900, CachedInputTokens: 800, OutputTokens: 100}, false},
		{"input beyond, its parts with it", Usage{InputTokens: MaxTokens, CachedInputTokens: MaxTokens, AudioInputTokens: 5, OutputTokens: 10},
			Usage{InputTokens: 1000, CachedInputTokens: 1000, OutputTokens: 10}, true},
		{"output beyond", Usage{InputTokens: 10, OutputTokens: 101, AudioOutputTokens: 101},
			Usage{InputTokens: 10, OutputTokens: 100, AudioOutputTokens: 100}, true},
		{"negative counts are clamped, not beyond", Usage{InputTokens: -5, OutputTokens: -1}, Usage{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, beyond := tc.u.Within(bound)
			if got != tc.want || beyond != tc.wantBeyond {
				t.Errorf("got %+v (beyond %v), want %+v (beyond %v)", got, beyond, tc.want, tc.wantBeyond)
			}
		})
	}
}
