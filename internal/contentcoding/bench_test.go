package contentcoding_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/tokenwarden/tokenwarden/internal/contentcoding"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
)

// BenchmarkChatStream measures usage extraction from an OpenAI chat
// stream as it arrives: plain, and compressed with each coding. MB/s is
// of the decoded stream, so the figures compare directly: the difference
// is the cost of decompression.
//
// The stream is synthetic but compresses like a real one (about 23:1 with
// gzip: every chunk repeats the same envelope) with varied words and
// random obfuscation strings, not one fixture repeated, which any coder
// would shrink to nothing.
func BenchmarkChatStream(b *testing.B) {
	plain := syntheticStream(5000)
	for _, coding := range []string{"identity", "gzip", "br", "zstd"} {
		body := compressWith(b, coding, plain)
		b.Run(coding, func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			req := &llm.Request{Model: "gpt-4o-mini"}
			for b.Loop() {
				r := openai.Chat{}.NewUsageReader(req, "text/event-stream", llm.ReaderOptions{Counter: llmtest.Chars{}})
				d, err := contentcoding.NewDecoder(coding, r.Write, 64<<20)
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(body); i += 16 << 10 {
					if err := d.Write(body[i:min(i+16<<10, len(body))]); err != nil {
						b.Fatal(err)
					}
				}
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
				if _, ok := r.Usage(); !ok {
					b.Fatal("no usage")
				}
			}
			b.ReportMetric(float64(len(body)), "wire-bytes")
		})
	}
}

// syntheticStream builds an include_usage chat stream of n content chunks.
func syntheticStream(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	word := func(k int) string {
		w := make([]byte, k)
		for i := range w {
			w[i] = letters[rng.IntN(26)]
		}
		return string(w)
	}
	vocab := make([]string, 2000)
	for i := range vocab {
		vocab[i] = word(2 + rng.IntN(9))
	}
	var out bytes.Buffer
	for i := range n {
		text := " " + vocab[rng.IntN(len(vocab))]
		if rng.IntN(4) == 0 {
			text += " " + vocab[rng.IntN(len(vocab))]
		}
		obf := make([]byte, 1+rng.IntN(8))
		for j := range obf {
			obf[j] = letters[rng.IntN(len(letters))]
		}
		fmt.Fprintf(&out, `data: {"id":"chatcmpl-C9xQm2bW7nKpL4tYvR8sZ1aD3eF5g","object":"chat.completion.chunk","created":%d,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_560af6e559","choices":[{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":%q}`+"\n\n",
			1767225600+i/50, text, obf)
	}
	out.WriteString(`data: {"id":"chatcmpl-C9xQm2bW7nKpL4tYvR8sZ1aD3eF5g","object":"chat.completion.chunk","created":1767225700,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":6000,"total_tokens":6031}}` + "\n\ndata: [DONE]\n\n")
	return out.Bytes()
}

func compressWith(b *testing.B, coding string, p []byte) []byte {
	var out bytes.Buffer
	switch coding {
	case "identity":
		return p
	case "gzip":
		w := gzip.NewWriter(&out)
		_, _ = w.Write(p)
		_ = w.Close()
	case "br":
		w := brotli.NewWriter(&out)
		_, _ = w.Write(p)
		_ = w.Close()
	case "zstd":
		w, _ := zstd.NewWriter(&out)
		_, _ = w.Write(p)
		_ = w.Close()
	}
	return out.Bytes()
}
