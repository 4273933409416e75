package extproc

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func providerHeaders(kv ...string) *extprocv3.HttpHeaders {
	h := &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Headers.Headers = append(h.Headers.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return h
}

// providerNow is the clock of the provider state tests.
var providerNow = time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)

func TestProviderState(t *testing.T) {
	tests := []struct {
		name   string
		status int
		from   origin
		kv     []string
		want   accounting.ProviderState
		ok     bool
	}{
		{"openai figures", 200, fromUpstream,
			[]string{"x-ratelimit-remaining-tokens", "29000", "x-ratelimit-remaining-requests", "99", "x-ratelimit-limit-tokens", "30000"},
			accounting.ProviderState{HasTokens: true, RemainingTokens: 29000, HasRequests: true, RemainingRequests: 99}, true},
		{"anthropic: the tokens figure, not the input or output one", 200, fromUpstream,
			[]string{"anthropic-ratelimit-tokens-remaining", "1999000", "anthropic-ratelimit-input-tokens-remaining", "1599000",
				"anthropic-ratelimit-output-tokens-remaining", "400000", "anthropic-ratelimit-requests-remaining", "3999"},
			accounting.ProviderState{HasTokens: true, RemainingTokens: 1999000, HasRequests: true, RemainingRequests: 3999}, true},
		{"the least of two figures", 200, fromUpstream,
			[]string{"x-ratelimit-remaining-tokens", "500", "x-ratelimit-remaining-tokens", "300"},
			accounting.ProviderState{HasTokens: true, RemainingTokens: 300}, true},
		{"a provider 429", 429, fromUpstream, []string{"retry-after", "1"},
			accounting.ProviderState{RateLimited: true, RetryAfter: time.Second, HasRetryAfter: true}, true},
		{"a 429 without a retry-after", 429, fromUpstream, nil, accounting.ProviderState{RateLimited: true}, true},
		{"openai's retry-after-ms wins, before or after", 429, fromUpstream,
			[]string{"retry-after", "2", "retry-after-ms", "1500.5", "retry-after", "3"},
			accounting.ProviderState{RateLimited: true, RetryAfter: 1500500 * time.Microsecond, HasRetryAfter: true}, true},
		{"a retry-after as an HTTP date", 429, fromUpstream, []string{"retry-after", "Mon, 02 Mar 2026 09:00:30 GMT"},
			accounting.ProviderState{RateLimited: true, RetryAfter: 30 * time.Second, HasRetryAfter: true}, true},
		{"a date already past waits nothing", 429, fromUpstream, []string{"retry-after", "Mon, 02 Mar 2026 08:00:00 GMT"},
			accounting.ProviderState{RateLimited: true, HasRetryAfter: true}, true},
		{"a garbled retry-after is none", 429, fromUpstream, []string{"retry-after", "soon", "retry-after-ms", "-5"},
			accounting.ProviderState{RateLimited: true}, true},
		{"a retry-after beyond a day is a day", 429, fromUpstream, []string{"retry-after", "99999999"},
			accounting.ProviderState{RateLimited: true, RetryAfter: 24 * time.Hour, HasRetryAfter: true}, true},
		{"a retry-after on a 200 is none of ours", 200, fromUpstream, []string{"retry-after", "5"}, accounting.ProviderState{}, false},
		{"a 429 of Envoy's own", 429, envoyAfterSend, []string{"x-ratelimit-remaining-tokens", "0"}, accounting.ProviderState{}, false},
		{"no figures", 200, fromUpstream, []string{"content-type", "application/json"}, accounting.ProviderState{}, false},
		{"zero is a figure", 200, fromUpstream, []string{"x-ratelimit-remaining-tokens", "0"},
			accounting.ProviderState{HasTokens: true}, true},
		{"garbage ignored", 200, fromUpstream,
			[]string{"x-ratelimit-remaining-tokens", "-5", "x-ratelimit-remaining-requests", "1e3", "anthropic-ratelimit-tokens-remaining", " 7"},
			accounting.ProviderState{}, false},
		{"too large ignored", 200, fromUpstream, []string{"x-ratelimit-remaining-tokens", "99999999999999999"}, accounting.ProviderState{}, false},
		{"empty ignored", 200, fromUpstream, []string{"x-ratelimit-remaining-tokens", ""}, accounting.ProviderState{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := providerState(tt.status, tt.from, providerHeaders(tt.kv...), providerNow)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzProviderState: whatever headers an upstream sends, reading them
// neither panics nor yields a figure that is negative or beyond any
// limit.
func FuzzProviderState(f *testing.F) {
	f.Add(200, "x-ratelimit-remaining-tokens: 29000\nx-ratelimit-remaining-requests: 99")
	f.Add(429, "retry-after: 1\nanthropic-ratelimit-tokens-remaining: 0")
	f.Add(429, "retry-after-ms: 1e300\nretry-after: Mon, 02 Mar 2026 09:00:30 GMT")
	f.Add(200, "anthropic-ratelimit-input-tokens-remaining: 18446744073709551616")
	f.Add(200, "x-ratelimit-remaining-tokens: 9999999999999999")
	f.Fuzz(func(t *testing.T, status int, headers string) {
		var kv []string
		for line := range strings.Lines(headers) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
			kv = append(kv, k, v)
		}
		ps, ok := providerState(status, fromUpstream, providerHeaders(kv...), providerNow)
		for _, v := range []int64{ps.RemainingTokens, ps.RemainingRequests} {
			if v < 0 || v > maxProviderFigure {
				t.Fatalf("figure %d out of [0, %d]", v, int64(maxProviderFigure))
			}
		}
		if ps.RetryAfter < 0 || ps.RetryAfter > 24*time.Hour || (ps.HasRetryAfter && !ps.RateLimited) {
			t.Fatalf("retry-after %v (stated %v) on status %d", ps.RetryAfter, ps.HasRetryAfter, status)
		}
		if ok != (ps.RateLimited || ps.HasTokens || ps.HasRequests) {
			t.Fatalf("ok %v for %+v", ok, ps)
		}
	})
}

// BenchmarkProviderState reads the figures of a typical OpenAI response:
// what a response on provider limits costs beyond one without.
func BenchmarkProviderState(b *testing.B) {
	h := providerHeaders("content-type", "application/json", "openai-processing-ms", "512",
		"x-ratelimit-limit-requests", "10000", "x-ratelimit-limit-tokens", "30000000",
		"x-ratelimit-remaining-requests", "9999", "x-ratelimit-remaining-tokens", "29999000",
		"x-ratelimit-reset-requests", "6ms", "x-ratelimit-reset-tokens", "2ms", "x-request-id", "req_123")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := providerState(200, fromUpstream, h, providerNow); !ok {
			b.Fatal("no figures read")
		}
	}
}
