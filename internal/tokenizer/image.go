package tokenizer

import (
	"encoding/base64"
	"image"
	_ "image/gif" // registered for DataURLImageSize
	_ "image/jpeg"
	_ "image/png"
	"math"
	"strings"
)

// Image costs follow the providers' published formulas (as of 2026):
//
//   - OpenAI tile models (gpt-4o, gpt-4.1, gpt-4.5, gpt-4-turbo, o1, o3,
//     gpt-5): detail "low" costs the base; otherwise the image is scaled to
//     fit 2048×2048, then so that its shortest side is at most 768 px,
//     and costs base + tile × (number of 512-px tiles). gpt-4o's base and
//     tile are 85 and 170; o1/o3 use 75/150, gpt-5 70/140, and
//     gpt-4o-mini 2833/5667 (its images cost as much as gpt-4o's in
//     dollars).
//   - OpenAI patch models (gpt-4.1-mini/nano, o4-mini, gpt-5-mini/nano,
//     codex-mini): one token per 32-px patch, at most 1536 patches (the
//     image is scaled down to fit), times a per-model multiplier; detail
//     does not matter. Where OpenAI's documentation and its bills differ,
//     the larger multiplier is used.
//   - Anthropic (claude-*): width × height / 750 after scaling the long
//     side to at most 1568 px.
//   - Gemini: 258 tokens per 768×768 tile, 258 for an image within
//     384×384; an unsized image counts as 1536×1536 (Gemini sizes have no
//     worst case).
//   - Anything else: the largest of the gpt-4o and Anthropic formulas.
//
// An image whose size is unknown (width or height ≤ 0) costs the most an
// image can cost the model at that detail (Counter.ImageTokens applies a
// configured default size first).

// ImageTokens returns the input tokens an image costs model at detail
// ("low", "high", "auto" or ""), given its size in pixels (≤ 0 when
// unknown).
func ImageTokens(model, detail string, width, height int) int64 {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	m = strings.TrimPrefix(m, "ft:")
	sized := width > 0 && height > 0
	switch {
	case strings.HasPrefix(m, "claude"):
		return anthropicImage(width, height, sized)
	case strings.HasPrefix(m, "gemini"):
		return geminiImage(width, height, sized)
	}
	if mult, ok := patchModel(m); ok {
		return patchImage(width, height, sized, mult)
	}
	base, tile, ok := tileModel(m)
	if !ok {
		return max(tileImage(detail, width, height, sized, 85, 170), anthropicImage(width, height, sized))
	}
	return tileImage(detail, width, height, sized, base, tile)
}

// patchModel returns the patch multiplier of an OpenAI patch model.
func patchModel(m string) (float64, bool) {
	for _, p := range []struct {
		prefix string
		mult   float64
	}{
		{"gpt-4.1-mini", 1.62}, {"gpt-4.1-nano", 2.46},
		{"gpt-5-mini", 1.62}, {"gpt-5-nano", 2.46},
		{"o4-mini", 1.72}, {"codex-mini", 1.72},
	} {
		if strings.HasPrefix(m, p.prefix) {
			return p.mult, true
		}
	}
	return 0, false
}

// tileModel returns the base and per-tile tokens of an OpenAI tile model.
func tileModel(m string) (base, tile int64, ok bool) {
	switch {
	case strings.HasPrefix(m, "gpt-4o-mini"):
		return 2833, 5667, true
	case strings.HasPrefix(m, "o1"), strings.HasPrefix(m, "o3"):
		return 75, 150, true
	case strings.HasPrefix(m, "gpt-5"):
		return 70, 140, true
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "chatgpt-4o"):
		return 85, 170, true
	}
	return 0, 0, false
}

func tileImage(detail string, w, h int, sized bool, base, tile int64) int64 {
	if strings.EqualFold(detail, "low") {
		return base
	}
	if !sized {
		// The largest image after scaling is 768 × 2048: 2 × 4 tiles.
		return base + 8*tile
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := int64(math.Ceil(fw/512-1e-9)) * int64(math.Ceil(fh/512-1e-9))
	return base + tile*tiles
}

func patchImage(w, h int, sized bool, mult float64) int64 {
	const maxPatches = 1536
	patches := float64(maxPatches)
	if sized {
		fw, fh := float64(w), float64(h)
		if p := math.Ceil(fw/32) * math.Ceil(fh/32); p > maxPatches {
			// Scale so that the patches fit, then fit whole patches
			// along the width, as OpenAI describes it.
			s := math.Sqrt(32 * 32 * maxPatches / (fw * fh))
			fw, fh = fw*s, fh*s
			r := math.Floor(fw/32) / (fw / 32)
			fw, fh = fw*r, fh*r
		}
		patches = min(math.Ceil(fw/32-1e-9)*math.Ceil(fh/32-1e-9), maxPatches)
	}
	return int64(math.Ceil(patches * mult))
}

func anthropicImage(w, h int, sized bool) int64 {
	const maxSide = 1568
	if !sized {
		// Claude scales anything over about 1.15 megapixels down.
		return 1600
	}
	fw, fh := float64(w), float64(h)
	if s := maxSide / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return int64(math.Ceil(fw * fh / 750))
}

func geminiImage(w, h int, sized bool) int64 {
	const perTile = 258
	if !sized {
		return perTile * 4 // a 1536-px square
	}
	if w <= 384 && h <= 384 {
		return perTile
	}
	return perTile * int64(math.Ceil(float64(w)/768)) * int64(math.Ceil(float64(h)/768))
}

// DataURLImageSize returns the size of a base64 data URL's image
// ("data:image/png;base64,…") from its header, decoding at most the first
// 192 KB (JPEG's size follows its metadata). ok is false for a plain URL,
// a format other than PNG, JPEG or GIF, or a broken image: the caller
// then charges the image as unsized.
func DataURLImageSize(url string) (width, height int, ok bool) {
	rest, found := strings.CutPrefix(url, "data:")
	if !found {
		return 0, 0, false
	}
	i := strings.Index(rest, ";base64,")
	if i < 0 {
		return 0, 0, false
	}
	data := rest[i+len(";base64,"):]
	data = data[:min(len(data), 256<<10)]
	data = data[:len(data)/4*4]
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}
