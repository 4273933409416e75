package main

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/config"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			printConfig(&out, cfg)
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}
