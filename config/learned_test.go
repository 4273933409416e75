package config

import (
	"slices"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc"
)

func TestParseLearnedOutput(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   extproc.LearnedOutput
		err    string
	}{
		{"off by default", "", extproc.LearnedOutput{}, ""},
		{"on, defaults", "estimation: {learned_output: {enabled: true}}\n", extproc.LearnedOutput{Enabled: true}, ""},
		{"every setting", "identity: {attributes: {tenant: {header: x-tenant}}}\nestimation: {learned_output: {enabled: true, quantile: 0.9, min_samples: 20, decay_samples: 200, floor: 64, max_keys: 100, scope: [tenant]}}\n",
			extproc.LearnedOutput{Enabled: true, Quantile: 0.9, MinSamples: 20, DecaySamples: 200, Floor: 64, MaxKeys: 100, Scope: []string{"tenant"}}, ""},
		{"checked while off", "estimation: {learned_output: {quantile: 1.5}}\n", extproc.LearnedOutput{},
			"config: estimation.learned_output.quantile: 1.5 is not in (0, 1)"},
		{"negative samples", "estimation: {learned_output: {enabled: true, min_samples: -1}}\n", extproc.LearnedOutput{},
			"config: estimation.learned_output.min_samples: -1 is below 1"},
		{"memory below min samples", "estimation: {learned_output: {enabled: true, min_samples: 100, decay_samples: 10}}\n", extproc.LearnedOutput{},
			"config: estimation.learned_output.decay_samples: 10 is below min_samples (100)"},
		{"memory too long", "estimation: {learned_output: {enabled: true, decay_samples: 2000000}}\n", extproc.LearnedOutput{},
			"config: estimation.learned_output.decay_samples: 2000000 is above 1000000"},
		{"floor too large", "estimation: {learned_output: {enabled: true, floor: 3000000000}}\n", extproc.LearnedOutput{},
			"config: estimation.learned_output.floor: 3000000000 is outside 1..2147483647"},
		{"too many keys", "estimation: {learned_output: {enabled: true, max_keys: 2000000}}\n", extproc.LearnedOutput{},
			"config: estimation.learned_output.max_keys: 2000000 is outside 1..1048576"},
		{"unknown scope", "estimation: {learned_output: {enabled: true, scope: [team]}}\n", extproc.LearnedOutput{},
			`config: estimation.learned_output.scope[0]: "team" has no source under identity.attributes`},
		{"model in scope", "estimation: {learned_output: {enabled: true, scope: [model]}}\n", extproc.LearnedOutput{},
			`config: estimation.learned_output.scope[0]: "model" is always part of the key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte("listen: 127.0.0.1:1\n" + tt.config))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got  %v\nwant %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Server.LearnedOutput
			if got.Enabled != tt.want.Enabled || got.Quantile != tt.want.Quantile || got.MinSamples != tt.want.MinSamples ||
				got.DecaySamples != tt.want.DecaySamples || got.Floor != tt.want.Floor || got.MaxKeys != tt.want.MaxKeys ||
				!slices.Equal(got.Scope, tt.want.Scope) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
