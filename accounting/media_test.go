package accounting

import (
	"strings"
	"testing"
)

// TestMediaTokenCost pins the audio and image rates: each part of the
// input or output at its own rate, a rate left at zero at the text rate,
// parts clamped within what they are part of, and the cost saturating.
func TestMediaTokenCost(t *testing.T) {
	full := Price{Input: 2.5, CachedInput: 1.25, AudioInput: 40, Output: 10, AudioOutput: 80, ImageOutput: 30}
	textOnly := Price{Input: 2.5, Output: 10}
	tests := []struct {
		name  string
		price Price
		usage Usage
		want  int64
	}{
		{"every part at its rate", full,
			Usage{InputTokens: 1000, CachedInputTokens: 100, AudioInputTokens: 300, OutputTokens: 500, AudioOutputTokens: 200, ImageOutputTokens: 100},
			// 600×2.5 + 100×1.25 + 300×40 + 200×10 + 200×80 + 100×30
			1500 + 125 + 12000 + 2000 + 16000 + 3000},
		{"unset media rates are the text rates", textOnly,
			Usage{InputTokens: 1000, AudioInputTokens: 300, OutputTokens: 500, AudioOutputTokens: 200, ImageOutputTokens: 100},
			1000*2.5 + 500*10},
		{"audio input beyond the uncached input is clamped", full,
			Usage{InputTokens: 1000, CachedInputTokens: 900, AudioInputTokens: 500, OutputTokens: 0}.Clamp(),
			// 900 cached, 100 audio: 900×1.25 + 100×40
			1125 + 4000},
		{"image output beyond the output left by audio is clamped", full,
			Usage{OutputTokens: 100, AudioOutputTokens: 80, ImageOutputTokens: 80}.Clamp(),
			// 80 audio, 20 image, no text
			80*80 + 20*30},
		{"absurd counts saturate", full,
			Usage{InputTokens: 1 << 62, AudioInputTokens: 1 << 62, OutputTokens: 1 << 62, ImageOutputTokens: 1 << 62}.Clamp(),
			MaxCost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.price.UsageCost(tt.usage); got != tt.want {
				t.Errorf("cost: got %d µ$, want %d", got, tt.want)
			}
		})
	}
}

func TestMediaClamp(t *testing.T) {
	got := Usage{InputTokens: 10, CachedInputTokens: 4, CacheWriteTokens: 3, AudioInputTokens: 9,
		OutputTokens: 10, AudioOutputTokens: -5, ImageOutputTokens: 50}.Clamp()
	want := Usage{InputTokens: 10, CachedInputTokens: 4, CacheWriteTokens: 3, AudioInputTokens: 3,
		OutputTokens: 10, AudioOutputTokens: 0, ImageOutputTokens: 10}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestMediaPricesScaleAndValidate(t *testing.T) {
	p := Price{Input: 1, AudioInput: 2, Output: 3, AudioOutput: 4, ImageOutput: 5}.Scale(2)
	if p.AudioInput != 4 || p.AudioOutput != 8 || p.ImageOutput != 10 {
		t.Errorf("Scale(2): got %+v, want the media rates doubled", p)
	}
	bad := Price{AudioInput: -1, AudioOutput: -1, ImageOutput: -1}
	err := bad.Validate()
	for _, field := range []string{"audio_input", "audio_output", "image_output"} {
		if err == nil || !containsField(err, field) {
			t.Errorf("Validate: got %v, want an error naming %s", err, field)
		}
	}
}

func containsField(err error, field string) bool {
	return strings.Contains(err.Error(), field+": ")
}

// TestMediaEstimateAtTheDearestRate: a reservation cannot tell text from
// audio or images, so it prices each side at the dearest rate set.
func TestMediaEstimateAtTheDearestRate(t *testing.T) {
	tests := []struct {
		name  string
		price Price
		want  int64
	}{
		{"text rates only", Price{Input: 2.5, Output: 10}, 1000*2.5 + 100*10},
		{"audio dearer", Price{Input: 2.5, AudioInput: 40, Output: 10, AudioOutput: 80}, 1000*40 + 100*80},
		{"image output dearest", Price{Input: 0.3, Output: 2.5, AudioOutput: 10, ImageOutput: 30}, 1000*0.3 + 100*30},
	}
	for _, tt := range tests {
		if got := tt.price.EstimateCost(Estimate{InputTokens: 1000, OutputTokens: 100}); got != tt.want {
			t.Errorf("%s: got %d µ$, want %d", tt.name, got, tt.want)
		}
	}
}
