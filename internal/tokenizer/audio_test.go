package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"testing"
)

func wav(rate uint32, seconds float64) []byte {
	var b bytes.Buffer
	data := int(float64(rate) * seconds)
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(36+data))
	b.WriteString("WAVEfmt ")
	binary.Write(&b, binary.LittleEndian, []uint32{16})
	binary.Write(&b, binary.LittleEndian, []uint16{1, 1})
	binary.Write(&b, binary.LittleEndian, []uint32{rate / 2, rate})
	binary.Write(&b, binary.LittleEndian, []uint16{2, 16})
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(data))
	b.Write(make([]byte, data))
	return b.Bytes()
}

func TestAudio(t *testing.T) {
	mp3 := append([]byte{0xFF, 0xFB, 0x90, 0x64}, make([]byte, 16000*3-4)...) // 128 kbit/s
	tests := []struct {
		name, format string
		data         []byte
		want         float64
	}{
		{"wav header", "wav", wav(32000, 2), 2},
		{"mp3 frame header", "mp3", mp3, 3},
		{"mp3 without a header: 32 kbit/s", "mp3", make([]byte, 8000), 2},
		{"unknown format: 16 kbit/s", "opus", make([]byte, 4000), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AudioSeconds(tt.format, tt.data[:min(len(tt.data), 4096)], int64(len(tt.data))); math.Abs(got-tt.want) > 0.01 {
				t.Errorf("AudioSeconds = %.3f, want %.3f", got, tt.want)
			}
		})
	}
	if got := AudioSecondsBase64("wav", base64.StdEncoding.EncodeToString(wav(32000, 1.5))); math.Abs(got-1.5) > 0.01 {
		t.Errorf("AudioSecondsBase64 = %.3f, want 1.5", got)
	}
	if got := AudioTokens("gpt-4o-audio-preview", 2.01); got != 21 {
		t.Errorf("AudioTokens(gpt-4o, 2.01 s) = %d, want 21", got)
	}
	if got := AudioTokens("gemini-2.5-flash", 2); got != 64 {
		t.Errorf("AudioTokens(gemini, 2 s) = %d, want 64", got)
	}
	if got := AudioTokens("gpt-4o", math.NaN()); got != 0 {
		t.Errorf("AudioTokens(NaN) = %d, want 0", got)
	}
}
