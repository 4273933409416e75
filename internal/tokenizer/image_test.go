package tokenizer

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"testing"
)

func TestImageTokens(t *testing.T) {
	tests := []struct {
		name          string
		model, detail string
		w, h          int
		want          int64
	}{
		{"gpt-4o low", "gpt-4o", "low", 4000, 3000, 85},
		{"gpt-4o 1024 square: 4 tiles", "gpt-4o", "high", 1024, 1024, 765},
		{"gpt-4o auto is high", "gpt-4o", "auto", 1024, 1024, 765},
		{"gpt-4o 2048x4096 scales to 768x1536: 6 tiles", "gpt-4o", "high", 2048, 4096, 1105},
		{"gpt-4o small image: 1 tile", "gpt-4o", "", 300, 200, 255},
		{"gpt-4o unsized: the worst case, 8 tiles", "gpt-4o", "high", 0, 0, 1445},
		{"gpt-4.1 uses tiles", "openai/gpt-4.1", "high", 1024, 1024, 765},
		{"o3 tiles", "o3", "high", 1024, 1024, 75 + 4*150},
		{"gpt-5 tiles", "gpt-5", "low", 1024, 1024, 70},
		{"gpt-4o-mini is expensive per tile", "gpt-4o-mini", "high", 512, 512, 2833 + 5667},
		{"gpt-4.1-mini patches", "gpt-4.1-mini", "low", 1024, 1024, 1659},        // 1024 patches × 1.62
		{"patches scaled to fit 1536", "gpt-4.1-mini", "high", 1800, 2400, 2353}, // 33 × 44 × 1.62
		{"patch model unsized", "o4-mini", "", 0, 0, 2642},                       // 1536 × 1.72
		{"claude", "claude-sonnet-4-5", "", 1000, 1000, 1334},
		{"claude scales the long side to 1568", "claude-opus-4", "", 2000, 1000, 1640},
		{"gemini small", "gemini-2.5-flash", "", 300, 300, 258},
		{"gemini tiles", "gemini-2.5-pro", "", 1000, 800, 4 * 258},
		{"unknown model: the larger formula", "llama-4-maverick", "high", 1000, 1000, 1334},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ImageTokens(tt.model, tt.detail, tt.w, tt.h); got != tt.want {
				t.Errorf("ImageTokens(%q, %q, %d, %d) = %d, want %d", tt.model, tt.detail, tt.w, tt.h, got, tt.want)
			}
		})
	}
}

func TestCounterImageDefault(t *testing.T) {
	c, err := New(Config{DefaultImageWidth: 1024, DefaultImageHeight: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ImageTokens("gpt-4o", "auto", 0, 0); got != 765 {
		t.Errorf("unsized image with a 1024x1024 default: got %d, want 765", got)
	}
	if got := c.ImageTokens("gpt-4o", "auto", 512, 512); got != 255 {
		t.Errorf("sized image: got %d, want 255", got)
	}
}

func TestDataURLImageSize(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 640, 480))); err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
	if w, h, ok := DataURLImageSize(url); !ok || w != 640 || h != 480 {
		t.Errorf("DataURLImageSize(png) = %d, %d, %v; want 640, 480, true", w, h, ok)
	}
	for _, bad := range []string{"https://example.com/cat.png", "data:image/png;base64,AAAA", "data:text/plain,hi", ""} {
		if _, _, ok := DataURLImageSize(bad); ok {
			t.Errorf("DataURLImageSize(%q): ok, want not", bad)
		}
	}
}
