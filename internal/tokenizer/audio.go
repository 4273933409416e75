package tokenizer

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"
)

// Audio is billed by duration: OpenAI's audio models about 10 input
// tokens per second (one per 100 ms), Gemini 32 per second. Other models
// are charged at the larger rate.
const (
	openAIAudioTokensPerSecond  = 10
	defaultAudioTokensPerSecond = 32
)

// AudioTokens returns the input tokens seconds of audio cost model.
func AudioTokens(model string, seconds float64) int64 {
	if !(seconds > 0) || math.IsInf(seconds, 0) {
		return 0
	}
	rate := float64(defaultAudioTokensPerSecond)
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if strings.HasPrefix(m, "gpt-") || EncodingForModel(m) != "" {
		rate = openAIAudioTokensPerSecond
	}
	return int64(math.Ceil(seconds * rate))
}

// Bitrates assumed for audio whose header does not tell, in bytes per
// second: low, so that the duration, and the estimate, come out high.
const (
	minMP3BytesPerSecond   = 32000 / 8 // 32 kbit/s, speech at its thinnest
	minAudioBytesPerSecond = 16000 / 8 // Opus and friends at 16 kbit/s
)

// AudioSeconds estimates the duration of encoded audio in format
// ("wav", "mp3", …) from its first bytes (a few kilobytes: the header)
// and its size in bytes. A WAV file's header gives its byte rate; an
// MP3's first frame header its bitrate; otherwise a low bitrate is
// assumed, which errs long.
func AudioSeconds(format string, header []byte, size int64) float64 {
	n := float64(max(size, 0))
	switch strings.ToLower(format) {
	case "wav", "wave":
		if rate := wavByteRate(header); rate > 0 {
			return n / float64(rate)
		}
		return n / (8000 * 2) // 8 kHz 16-bit mono: as slow as WAV speech gets
	case "pcm16":
		return n / (24000 * 2) // OpenAI's raw PCM: 24 kHz, 16-bit mono
	case "mp3", "mpeg":
		if rate := mp3ByteRate(header); rate > 0 {
			return n / float64(rate)
		}
		return n / minMP3BytesPerSecond
	}
	return n / minAudioBytesPerSecond
}

// AudioSecondsBase64 is AudioSeconds for base64-encoded audio (an
// input_audio part's data): it decodes only the header.
func AudioSecondsBase64(format, data string) float64 {
	head := data[:min(len(data), 8<<10)]
	header, _ := base64.StdEncoding.DecodeString(head[:len(head)/4*4])
	return AudioSeconds(format, header, Base64Size(data))
}

// Base64Size returns how many bytes standard base64 text decodes to,
// without decoding it.
func Base64Size(data string) int64 {
	data = strings.TrimRight(data, "=")
	return int64(len(data)) * 3 / 4
}

// wavByteRate returns the byte rate of a RIFF WAVE header, or 0.
func wavByteRate(b []byte) uint32 {
	if len(b) < 32 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return 0
	}
	// Find the "fmt " chunk; its byte rate is at offset 8 of its data.
	for i := 12; i+16 <= len(b) && i < 4096; {
		size := int(binary.LittleEndian.Uint32(b[i+4:]))
		if string(b[i:i+4]) == "fmt " {
			return binary.LittleEndian.Uint32(b[i+16:])
		}
		if size < 0 || size > len(b) {
			return 0
		}
		i += 8 + size + size&1
	}
	return 0
}

// mp3ByteRate returns the byte rate of the first MPEG-1/2 layer III frame
// header after an optional ID3v2 tag, or 0.
func mp3ByteRate(b []byte) uint32 {
	i := 0
	if len(b) >= 10 && string(b[:3]) == "ID3" {
		size := int(b[6]&0x7f)<<21 | int(b[7]&0x7f)<<14 | int(b[8]&0x7f)<<7 | int(b[9]&0x7f)
		i = 10 + size
	}
	if i+4 > len(b) || b[i] != 0xFF || b[i+1]&0xE0 != 0xE0 {
		return 0
	}
	version := b[i+1] >> 3 & 3 // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
	layer := b[i+1] >> 1 & 3   // 1: layer III
	idx := b[i+2] >> 4
	if layer != 1 || idx == 0 || idx == 15 || version == 1 {
		return 0
	}
	kbps := [16]uint32{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}
	if version != 3 {
		kbps = [16]uint32{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}
	}
	return kbps[idx] * 1000 / 8
}
