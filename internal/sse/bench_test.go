package sse

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
)

// benchStreams are the shapes that matter on the hot path: OpenAI-style streams of many
// small data-only events, Anthropic-style named events, and one large event such as a
// Responses API response.completed that repeats the whole output, below and above the
// default bound.
func benchStreams(b *testing.B) []struct {
	name   string
	stream []byte
} {
	b.Helper()
	const target = 1 << 20
	repeat := func(fixture string) []byte {
		f := readFixture(b, fixture)
		return bytes.Repeat(f, (target+len(f)-1)/len(f))
	}
	large := func(n int) []byte {
		return slices.Concat([]byte("event: response.completed\ndata: "), patternLine(n), []byte("\n\n"))
	}
	return []struct {
		name   string
		stream []byte
	}{
		{name: "openai", stream: repeat("openai_chat_include_usage.sse")},
		{name: "anthropic", stream: repeat("anthropic_messages.sse")},
		{name: "large=512KiB", stream: large(512 << 10)},
		{name: "large=8MiB-truncated", stream: large(8 << 20)},
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, s := range benchStreams(b) {
		for _, chunk := range []int{1 << 10, 16 << 10, len(s.stream)} {
			label := strconv.Itoa(chunk>>10) + "KiB"
			if chunk == len(s.stream) {
				label = "whole"
			}
			b.Run(s.name+"/chunk="+label, func(b *testing.B) {
				d := NewDecoder(Options{})
				events := 0
				fn := func(Event) { events++ }
				b.SetBytes(int64(len(s.stream)))
				b.ReportAllocs()
				for b.Loop() {
					d.Reset()
					for p := s.stream; len(p) > 0; {
						k := min(chunk, len(p))
						d.Write(p[:k], fn)
						p = p[k:]
					}
				}
				if events == 0 {
					b.Fatal("got 0 events, want some")
				}
			})
		}
	}
}
