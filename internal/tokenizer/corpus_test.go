package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A corpus is one class of text for the accuracy table: samples of a few
// hundred bytes to a few kilobytes, the size of a message in a prompt, so
// that a class's worst case is a realistic single message rather than an
// average over megabytes.
type corpus struct {
	name    string
	samples []string
	// maxOver is the largest over-estimate the test accepts on any sample
	// (0.25 is 25 %); zero means unchecked. Under-estimates are bounded
	// for every class.
	maxOver float64
}

// sampleSize is the size the machine-text corpora are cut to, and
// minSample the smallest piece kept: on a few dozen tokens one token is
// several percent, which says nothing about the estimator.
const (
	sampleSize = 2048
	minSample  = 400
)

// corpora builds the accuracy corpora from text found on every machine
// that builds the project (the Go tree, Debian's license texts), from
// testdata/ and from seeded generators, so that the table is the same on
// every run and needs no download.
func corpora(t testing.TB) []corpus {
	t.Helper()
	cs := []corpus{
		{name: "English prose", samples: proseSamples(t), maxOver: 0.25},
		{name: "Source code", samples: codeSamples(t), maxOver: 0.25},
		{name: "JSON, pretty, short keys", samples: jsonSamples()},
		{name: "Chinese", samples: paragraphs(t, "zh.txt")},
		{name: "Japanese", samples: paragraphs(t, "ja.txt")},
		{name: "Other scripts", samples: paragraphs(t, "scripts.txt")},
		{name: "Emoji mix", samples: emojiSamples()},
		{name: "Random base64", samples: base64Samples()},
		{name: "Random hex", samples: hexSamples()},
	}
	for _, c := range cs {
		if len(c.samples) < 10 {
			t.Fatalf("corpus %q has %d samples, want at least 10", c.name, len(c.samples))
		}
	}
	return cs
}

// proseSamples cuts English prose from Debian's license texts and the Go
// tree's prose documents and package documentation comments.
func proseSamples(t testing.TB) []string {
	t.Helper()
	var texts []string
	lic, _ := filepath.Glob("/usr/share/common-licenses/*")
	sort.Strings(lic)
	for _, p := range lic {
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			continue // GPL → GPL-3 and friends: count each text once
		}
		texts = append(texts, readFile(t, p))
	}
	root := goEnv("GOROOT")
	for _, p := range []string{"README.md", "CONTRIBUTING.md", "SECURITY.md", "doc/godebug.md"} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err == nil {
			texts = append(texts, string(b))
		}
	}
	docs := goFiles(t, func(p string) bool { return filepath.Base(p) == "doc.go" })
	for i, p := range docs {
		if i%3 == 0 {
			texts = append(texts, docComments(readFile(t, p)))
		}
	}
	var out []string
	for _, s := range texts {
		out = append(out, chunks(s, "\n\n", sampleSize)...)
	}
	return dropSmall(out)
}

// dropSmall removes samples shorter than minSample.
func dropSmall(ss []string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return len(s) < minSample })
}

// docComments returns the text of a Go file's line comments.
func docComments(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		line = strings.TrimLeft(line, " \t")
		if rest, ok := strings.CutPrefix(line, "//"); ok && !strings.HasPrefix(rest, "go:") {
			b.WriteString(strings.TrimPrefix(rest, " "))
		}
	}
	return b.String()
}

// codeSamples cuts source code from the Go tree: Go, C and JavaScript.
func codeSamples(t testing.TB) []string {
	t.Helper()
	var out []string
	for i, p := range goFiles(t, func(p string) bool { return strings.HasSuffix(p, ".go") }) {
		if i%40 != 0 {
			continue
		}
		cs := chunks(readFile(t, p), "\n", sampleSize)
		out = append(out, cs[:min(2, len(cs))]...)
	}
	root := goEnv("GOROOT")
	cfiles, _ := filepath.Glob(filepath.Join(root, "src/runtime/cgo/*.c"))
	sort.Strings(cfiles)
	for i, p := range cfiles {
		if i%4 == 0 {
			out = append(out, chunks(readFile(t, p), "\n", sampleSize)[0])
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "lib/wasm/wasm_exec.js")); err == nil {
		out = append(out, chunks(string(b), "\n", sampleSize)...)
	}
	return dropSmall(out)
}

// goFiles lists the files below GOROOT/src that keep says yes to, in
// lexical order, skipping testdata (whose content is anything but typical).
func goFiles(t testing.TB, keep func(string) bool) []string {
	t.Helper()
	var files []string
	root := filepath.Join(goEnv("GOROOT"), "src")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && keep(p) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return files
}

// paragraphs returns a testdata file's blank-line separated paragraphs.
func paragraphs(t testing.TB, name string) []string {
	t.Helper()
	var out []string
	for _, p := range strings.Split(readFile(t, filepath.Join("testdata", name)), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// chunks cuts s at sep into pieces of about size bytes; a piece never
// ends inside a separator-free run shorter than size.
func chunks(s, sep string, size int) []string {
	var out []string
	for len(s) > 0 {
		if len(s) <= size*3/2 {
			out = append(out, s)
			break
		}
		i := strings.Index(s[size:], sep)
		if i < 0 {
			out = append(out, s)
			break
		}
		i += size + len(sep)
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading corpus: %v", err)
	}
	return string(b)
}

// words are common English words for the generated corpora.
var words = strings.Fields(`the of and to in is you that it he was for on are as with his
they at be this have from or one had by word but not what all were we when your can said
there use an each which she do how their if will up other about out many then them these
so some her would make like him into time has look two more write go see number no way
could people my than first water been call who oil its now find long down day did get
come made may part great thanks love party today tomorrow ready launch ship done nice
fire happy birthday congrats team coffee weekend morning night`)

// emoji are single emoji and the sequences that tokenise worst: skin
// tones, ZWJ families and professions, flags, keycaps and variation
// selectors.
var emoji = strings.Fields(`😀 😂 🤣 😊 😍 🥰 😎 🤔 😅 😭 😡 🙏 👍 👎 👏 🙌 💪 🎉 🎊 🎂 🎁
🔥 ✨ ⭐ 🌟 💯 ✅ ❌ ⚠️ ❤️ 💙 💚 🧡 💜 🖤 🤍 💔 ☀️ 🌧️ ⛄ ☕ 🍕 🍔 🍣 🍺 🚀 ✈️ 🏠 💻 📱
📈 📉 🐛 🔒 🔑 🗓️ 📦 👀 🤖 🦄 🐍 🦀 👍🏽 👋🏿 🙋🏻‍♀️ 👨‍👩‍👧‍👦 👩‍💻 🧑🏾‍🚀 🏳️‍🌈 🏴‍☠️ 🇩🇪 🇯🇵
🇺🇸 🇧🇷 🇪🇺 1️⃣ #️⃣ ©️ ™️ 🫠 🫶 🥹 🪿`)

// emojiSamples generates chat-like text: words with emoji between them,
// glued to them and in runs.
func emojiSamples() []string {
	r := rand.New(rand.NewPCG(6, 1))
	var out []string
	for range 60 {
		var b strings.Builder
		n := 20 + r.IntN(150)
		density := 0.2 + 0.6*r.Float64()
		for i := range n {
			if i > 0 && r.IntN(4) != 0 {
				b.WriteByte(' ')
			}
			if r.Float64() < density {
				e := emoji[r.IntN(len(emoji))]
				for range 1 + r.IntN(3)*r.IntN(2) {
					b.WriteString(e)
				}
			} else {
				b.WriteString(words[r.IntN(len(words))])
				if r.IntN(8) == 0 {
					b.WriteString(".!?,"[r.IntN(4):][:1])
				}
			}
		}
		out = append(out, b.String())
	}
	return out
}

// jsonSamples generates pretty-printed JSON documents of the kind sent as
// a message or a tool result: short keys, numbers, identifiers,
// timestamps, short strings.
func jsonSamples() []string {
	r := rand.New(rand.NewPCG(7, 1))
	keys := strings.Fields("id n v x y z ts ok at t k tags name type ref qty px sku lat lon")
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(10); {
		case k < 3:
			return r.IntN(1 << (4 * (1 + r.IntN(6))))
		case k < 4:
			return float64(r.IntN(1e6)) / 1000
		case k < 5:
			return words[r.IntN(len(words))]
		case k < 6:
			return fmt.Sprintf("%08x-%04x-%04x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff)
		case k < 7:
			return fmt.Sprintf("2025-%02d-%02dT%02d:%02d:%02dZ", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60))
		case k < 8:
			return r.IntN(2) == 0
		case k < 9 && depth < 3:
			a := make([]any, 1+r.IntN(4))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		case depth < 3:
			m := map[string]any{}
			for range 1 + r.IntN(5) {
				m[keys[r.IntN(len(keys))]] = value(depth + 1)
			}
			return m
		}
		return nil
	}
	indents := []string{"  ", "    ", "\t"}
	var out []string
	for i := range 60 {
		var doc []any
		for range 4 + r.IntN(12) {
			m := map[string]any{}
			for range 2 + r.IntN(6) {
				m[keys[r.IntN(len(keys))]] = value(1)
			}
			doc = append(doc, m)
		}
		b, err := json.MarshalIndent(doc, "", indents[i%len(indents)])
		if err != nil {
			panic(err)
		}
		out = append(out, string(b))
	}
	return out
}

// base64Samples generates random data in the encodings it takes in
// prompts: plain, MIME-wrapped, URL-safe token-like and data URLs.
func base64Samples() []string {
	src := rand.NewChaCha8([32]byte{'b', '6', '4'})
	r := rand.New(src)
	var out []string
	for i := range 60 {
		raw := make([]byte, 150+int(r.Uint64()%2000))
		src.Read(raw)
		s := base64.StdEncoding.EncodeToString(raw)
		switch i % 4 {
		case 1:
			var b strings.Builder
			for len(s) > 76 {
				b.WriteString(s[:76] + "\n")
				s = s[76:]
			}
			s = b.String() + s
		case 2:
			s = base64.RawURLEncoding.EncodeToString(raw[:30]) + "." + base64.RawURLEncoding.EncodeToString(raw[30:])
		case 3:
			s = "data:image/png;base64," + s
		}
		out = append(out, s)
	}
	return out
}

// hexSamples generates random bytes in hex: digests, hex dumps, key
// fingerprints and byte-array literals.
func hexSamples() []string {
	src := rand.NewChaCha8([32]byte{'h', 'e', 'x'})
	r := rand.New(src)
	var out []string
	for i := range 60 {
		raw := make([]byte, 32+int(r.Uint64()%1200))
		src.Read(raw)
		var s string
		switch i % 5 {
		case 0:
			s = hex.EncodeToString(raw)
		case 1:
			s = strings.ToUpper(hex.EncodeToString(raw))
		case 2:
			s = hex.Dump(raw)
		case 3:
			var b bytes.Buffer
			for j, c := range raw {
				if j > 0 {
					b.WriteByte(':')
				}
				fmt.Fprintf(&b, "%02X", c)
			}
			s = b.String()
		case 4:
			var b bytes.Buffer
			for j, c := range raw {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "0x%02x", c)
			}
			s = b.String()
		}
		out = append(out, s)
	}
	return out
}

// goEnv returns a go env variable (GOROOT, GOMODCACHE) as the go command
// that runs the tests sees it. One set in the environment is taken as it
// is, as the go command takes it: a test binary run under valgrind cannot
// start the go command (callgrind fails on the child's signal).
func goEnv(key string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		panic(fmt.Sprintf("go env %s: %v", key, err))
	}
	return strings.TrimSpace(string(out))
}
