package main

import (
	"strings"
	"testing"
)

// TestPrintConfigBudgets: check-config says which limits are shadow
// limits.
func TestPrintConfigBudgets(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   []string
	}{
		{"shadow", "limits: [{name: t, dimension: tokens, limit: 5, window: 1m, mode: shadow}]\n", []string{
			"  t                        5 tokens per minute, global, sliding_window, shadow: counted, never enforced",
		}},
		{"prices", `
models:
  gpt-4o: {input: 2.5, cached_input: 1.25, output: 10}
  gpt-4o*: {input: 40, output: 80}
  gpt-4o-audio-preview: {input: 2.5, audio_input: 40, output: 10, audio_output: 80}
  default: {input: 150, output: 600}
limits:
  - {name: spend-4o, dimension: cost, limit: 5, window: day, match: {model: gpt-4o-2024-08-06}}
  - {name: spend-rt, dimension: cost, limit: 5, window: day, match: {model: gpt-4o-realtime-preview}}
  - {name: spend-o1, dimension: cost, limit: 5, window: day, match: {model: o1-pro}}
`, []string{
			"  gpt-4o                   input 2.5, cached input 1.25, cache write 3.125 (1.25× input), cache write 1h 5 (2× input), audio input 2.5 (input), output 10, audio output 10 (output), image output 10 (output)",
			"  gpt-4o*                  input 40, cached input 40 (input), cache write 50 (1.25× input), cache write 1h 80 (2× input), audio input 40 (input), output 80, audio output 80 (output), image output 80 (output)",
			"  gpt-4o                   (models): gpt-4o, its own entry",
			"  gpt-4o-audio-preview     input 2.5, cached input 2.5 (input), cache write 3.125 (1.25× input), cache write 1h 5 (2× input), audio input 40, output 10, audio output 80, image output 10 (output)",
			"  gpt-4o-2024-08-06        (limit spend-4o): gpt-4o, its family's entry",
			"  gpt-4o-realtime-preview  (limit spend-rt): gpt-4o*, the longest pattern",
			"  o1-pro                   (limit spend-o1): default, the default",
		}},
		{"time zones", `
limits:
  - {name: berlin-day, dimension: tokens, algorithm: fixed_window, limit: 5, window: day, time_zone: Europe/Berlin}
  - {name: ny-month, dimension: tokens, algorithm: fixed_window, limit: 5, window: month, time_zone: America/New_York}
  - {name: utc-day, dimension: tokens, algorithm: fixed_window, limit: 5, window: day, time_zone: UTC}
`, []string{
			"  berlin-day               5 tokens per calendar day in Europe/Berlin, global, fixed_window, on store error deny",
			"  ny-month                 5 tokens per calendar month in America/New_York, global, fixed_window, on store error deny",
			"  utc-day                  5 tokens per day, global, fixed_window, on store error deny",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := printed(t, tt.config)
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}
