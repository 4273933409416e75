package extproc

import (
	"strings"
	"testing"
)

// hasProviderPrefix is isProviderRateLimitHeader the plain way: any of
// providerHeaderPrefixes.
func hasProviderPrefix(name string) bool {
	for _, p := range providerHeaderPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TestProviderRateLimitHeader: the provider's own rate-limit headers are
// found by every prefix, and nothing else is.
func TestProviderRateLimitHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"x-ratelimit-remaining-tokens", true},
		{"x-ratelimit-", true},
		{"x-ratelimi", false},
		{"x-request-id", false},
		{"anthropic-ratelimit-tokens-limit", true},
		{"anthropic-priority-input-tokens-remaining", true},
		{"anthropic-organization-id", false},
		{"ratelimit", true},
		{"ratelimit-policy", true},
		{"ratelimitbysize-remaining", true},
		{"retry-after", false},
		{"content-type", false},
		{"", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isProviderRateLimitHeader(tc.name); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzProviderRateLimitHeader holds the first-byte dispatch to the list
// of prefixes.
func FuzzProviderRateLimitHeader(f *testing.F) {
	for _, p := range providerHeaderPrefixes {
		f.Add(p)
		f.Add(p + "x")
		f.Add(p[:len(p)-1])
	}
	f.Add("")
	f.Add("content-length")
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := isProviderRateLimitHeader(name), hasProviderPrefix(name); got != want {
			t.Fatalf("%q: got %v, want %v", name, got, want)
		}
	})
}
