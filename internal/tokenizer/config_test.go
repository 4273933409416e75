package tokenizer

import "testing"

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // New's error, exactly; "" for none
	}{
		{"zero value", Config{}, ""},
		{"full", Config{Mode: ModeExact, CharsPerToken: 3.5, PerModel: []Rule{{Pattern: "claude-*", Mode: ModeApproximate, CharsPerToken: 3}},
			DefaultImageWidth: 512, DefaultImageHeight: 512}, ""},
		{"bad mode", Config{Mode: "precise"}, `tokenizer: "precise" is not "approximate" or "exact"`},
		{"bad rate", Config{CharsPerToken: -1}, "chars_per_token: -1 is outside 0.5..20"},
		{"absurd rate", Config{CharsPerToken: 100}, "chars_per_token: 100 is outside 0.5..20"},
		{"empty pattern", Config{PerModel: []Rule{{Mode: ModeExact}}}, "per_model[0].pattern: required"},
		{"bad rule mode", Config{PerModel: []Rule{{Pattern: "x", Mode: "fast"}}}, `per_model[0].tokenizer: "fast" is not "approximate" or "exact"`},
		{"bad rule rate", Config{PerModel: []Rule{{Pattern: "x"}, {Pattern: "y", CharsPerToken: 0.1}}}, "per_model[1].chars_per_token: 0.1 is outside 0.5..20"},
		{"half an image size", Config{DefaultImageWidth: 100}, "default_image: set both width and height, or neither"},
		{"negative image size", Config{DefaultImageWidth: -1, DefaultImageHeight: 5}, "default_image.width: must not be negative"},
		{"every problem at once", Config{Mode: "x", CharsPerToken: 99, PerModel: []Rule{{CharsPerToken: -2}}, DefaultImageHeight: 3},
			"tokenizer: \"x\" is not \"approximate\" or \"exact\"\nchars_per_token: 99 is outside 0.5..20\n" +
				"per_model[0].pattern: required\nper_model[0].chars_per_token: -2 is outside 0.5..20\n" +
				"default_image: set both width and height, or neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("New: got error %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"gpt-4o", "gpt-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"gpt-4o*", "gpt-4o-mini", true},
		{"claude-*", "Claude-Sonnet-4", true},
		{"*/llama-3*", "meta-llama/llama-3.1-70b", true},
		{"*llama*", "meta/Llama-3", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"*", "", true},
		{"", "x", false},
	}
	for _, tt := range tests {
		if got := MatchModel(tt.pattern, tt.name); got != tt.want {
			t.Errorf("MatchModel(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestEncodingForModel(t *testing.T) {
	tests := []struct{ model, want string }{
		{"gpt-4o", O200kBase},
		{"gpt-4o-mini-2024-07-18", O200kBase},
		{"chatgpt-4o-latest", O200kBase},
		{"gpt-4.1-nano", O200kBase},
		{"gpt-5", O200kBase},
		{"gpt-5.1-codex", O200kBase},
		{"o1-preview", O200kBase},
		{"o3", O200kBase},
		{"o4-mini", O200kBase},
		{"openai/gpt-4o", O200kBase},
		{"ft:gpt-4o-mini:acme::abc", O200kBase},
		{"gpt-4", Cl100kBase},
		{"gpt-4-turbo-2024-04-09", Cl100kBase},
		{"gpt-3.5-turbo-0125", Cl100kBase},
		{"gpt-35-turbo", Cl100kBase},
		{"text-embedding-3-small", Cl100kBase},
		{"o1x", ""},
		{"claude-sonnet-4-5", ""},
		{"gemini-2.5-pro", ""},
		{"llama-3.1-70b", ""},
	}
	for _, tt := range tests {
		if got := EncodingForModel(tt.model); got != tt.want {
			t.Errorf("EncodingForModel(%q) = %q, want %q", tt.model, got, tt.want)
		}
	}
}

func TestMethod(t *testing.T) {
	c, err := New(Config{Mode: ModeExact, PerModel: []Rule{{Pattern: "claude-*", CharsPerToken: 3.2}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		model string
		want  Method
	}{
		{"gpt-4o", Method{Mode: ModeExact, Encoding: O200kBase, Profile: profileO200k, Scale: 1, Rule: -1}},
		{"gpt-4", Method{Mode: ModeExact, Encoding: Cl100kBase, Profile: profileCl100k, Scale: 1, Rule: -1}},
		{"claude-haiku-4-5", Method{Mode: ModeExact, Profile: profileGeneric, Scale: 1.25, Rule: 0}},
	}
	for _, tt := range tests {
		if got := c.Method(tt.model); got != tt.want {
			t.Errorf("Method(%q) = %+v, want %+v", tt.model, got, tt.want)
		}
	}
}
