package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	tiktoken "github.com/pkoukk/tiktoken-go"
)

// Regenerating approx.bin:
//
//	go test ./internal/tokenizer -run TestGenerateTables -generate -v
//
// The training text is disjoint from the accuracy corpora (corpus_test.go):
// other Go files and comments than those sampled there, Debian's READMEs,
// Python's documentation and standard library, C headers, npm's sources,
// the Vim tutor in 20 languages, the translated Rust by Example, Japanese,
// Chinese and Korean literature from golang.org/x/text's test data (in the
// module cache), MIME type descriptions in 50 languages,
// testdata/train-scripts.txt, and generated JSON, emoji and random strings. Sources missing on a machine are skipped
// and reported; the run takes about a minute.
var generate = flag.Bool("generate", false, "retrain approx.bin from this machine's text")

// trainClass is one kind of training text.
type trainClass struct {
	name  string
	texts []string
	// weight is the class's share of the learned weights relative to
	// the others, whatever its size.
	weight float64
}

func TestGenerateTables(t *testing.T) {
	if !*generate {
		t.Skip("run with -generate to retrain approx.bin")
	}
	classes := trainingText(t)
	var ps []*profile
	for _, enc := range []struct{ profile, encoding string }{{profileO200k, O200kBase}, {profileCl100k, Cl100kBase}} {
		e, err := encoding(enc.encoding)
		if err != nil {
			t.Fatal(err)
		}
		tk := newTokenLengths(e)
		st := newTrainStats()
		var chunks []trainChunk
		for ci, c := range classes {
			w := c.weight * 1e6 / float64(totalLen(c.texts))
			for _, s := range c.texts {
				ch := st.add(tk, ci, w, s)
				chunks = append(chunks, ch)
			}
		}
		p := st.build(enc.profile, tk)
		calibrate(t, p, classes, chunks)
		ps = append(ps, p)
	}
	data, err := encodeProfiles(ps...)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("approx.bin", data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote approx.bin: %d bytes", len(data))
}

func totalLen(ss []string) int {
	n := 1
	for _, s := range ss {
		n += len(s)
	}
	return n
}

// tokenLengths gives the byte length of each token of an encoding.
type tokenLengths struct {
	enc  *tiktoken.Tiktoken
	lens map[int]int
}

func newTokenLengths(e *tiktoken.Tiktoken) *tokenLengths {
	return &tokenLengths{enc: e, lens: map[int]int{}}
}

// boundaries returns, for each byte offset of s, whether a token starts
// there.
func (tk *tokenLengths) boundaries(s string) []bool {
	ids := tk.enc.EncodeOrdinary(s)
	b := make([]bool, len(s)+1)
	off := 0
	for _, id := range ids {
		n, ok := tk.lens[id]
		if !ok {
			n = len(tk.enc.Decode([]int{id}))
			tk.lens[id] = n
		}
		if off < len(b) {
			b[off] = true
		}
		off += n
	}
	b[len(s)] = true
	return b
}

func (tk *tokenLengths) count(s string) int { return len(tk.enc.EncodeOrdinary(s)) }

// trainStats accumulates weighted observations of where tokens start.
type trainStats struct {
	// pairN and pairB count the pairs (ASCII or continuation byte, then
	// ASCII) and the token boundaries between them.
	pairN, pairB []float64
	// charN and charB count multi-byte characters by their first two
	// bytes and the boundaries at or inside them.
	charN, charB map[uint16]float64
	// runN, runB and runPairs count runs of two or more spaces or tabs
	// by byte, the boundaries inside them and the pairs inside them.
	runN, runB, runPairs [256]float64
}

// trainChunk is one training text's estimate split by what calibration
// scales: ASCII pairs and runs, multi-byte characters, and the rest.
type trainChunk struct {
	class                      int
	tokens                     float64
	letters, ascii, multi, fix float64
}

func newTrainStats() *trainStats {
	return &trainStats{pairN: make([]float64, 65536), pairB: make([]float64, 65536), charN: map[uint16]float64{}, charB: map[uint16]float64{}}
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// add records s and returns it as a chunk for calibration (whose parts
// are filled in by build's weights later).
func (st *trainStats) add(tk *tokenLengths, class int, w float64, s string) trainChunk {
	bd := tk.boundaries(s)
	ch := trainChunk{class: class, tokens: float64(tk.count(s))}
	n := len(s)
	for i := 1; i < n; {
		a, b := s[i-1], s[i]
		if isDigit(a) && isDigit(b) {
			i++ // a third of a token: nothing to learn
			continue
		}
		if a == b && isRunByte(b) {
			j := i + 1
			for j < n && s[j] == b {
				j++
			}
			st.runN[b] += w
			st.runPairs[b] += w * float64(j-i)
			for k := i; k < j; k++ {
				if bd[k] {
					st.runB[b] += w
				}
			}
			i = j
			continue
		}
		if b < utf8.RuneSelf && (a < utf8.RuneSelf || a < 0xC0) {
			k := uint16(a) | uint16(b)<<8
			st.pairN[k] += w
			if bd[i] {
				st.pairB[k] += w
			}
		}
		i++
	}
	for i := 0; i < n; {
		r, size := utf8.DecodeRuneInString(s[i:])
		if size > 1 && r != utf8.RuneError {
			k := uint16(s[i]) | uint16(s[i+1])<<8
			st.charN[k] += w
			for j := i; j < i+size; j++ {
				if bd[j] {
					st.charB[k] += w
				}
			}
		}
		i += size
	}
	return ch
}

// Class priors for smoothing pair weights that the training text saw
// rarely: the byte classes of the approximation's model.
func byteClass(c byte) int {
	switch {
	case c == ' ':
		return 0
	case c == '\n' || c == '\r':
		return 1
	case c < ' ' || c == 0x7f:
		return 2
	case 'a' <= c && c <= 'z':
		return 3
	case 'A' <= c && c <= 'Z':
		return 4
	case '0' <= c && c <= '9':
		return 5
	case c < 0x80:
		return 6
	case c < 0xC0:
		return 7
	}
	return 8
}

// contWeight is the cost of each continuation byte after the second of a
// character, so that garbage made of continuation bytes is not free.
const contWeight = 0.2

// build turns the statistics into a profile (before calibration).
func (st *trainStats) build(name string, tk *tokenLengths) *profile {
	const alpha = 10 // pseudo-observations pulling rare pairs to their class
	var cN, cB [9][9]float64
	for k := range st.pairN {
		a, b := byteClass(byte(k)), byteClass(byte(k>>8))
		cN[a][b] += st.pairN[k]
		cB[a][b] += st.pairB[k]
	}
	p := &profile{name: name}
	set := func(k int, tokens float64) {
		p.pairs[k] = uint16(min(math.Round(tokens*weightOne), math.MaxUint16))
	}
	// Multi-byte characters: by their first two bytes, else by their
	// first byte, else by length, with defaults for scripts never seen
	// that are high rather than low.
	leadN, leadB := map[byte]float64{}, map[byte]float64{}
	// In key order: float sums must not depend on map order, or two runs
	// could round a weight differently.
	for _, k := range slices.Sorted(maps.Keys(st.charN)) {
		leadN[byte(k)] += st.charN[k]
		leadB[byte(k)] += st.charB[k]
	}
	charCost := func(lead, c1 byte) float64 {
		size := 2
		def := 1.0
		switch {
		case lead >= 0xF0:
			size, def = 4, 3.0
		case lead >= 0xE0:
			size, def = 3, 1.5
		}
		const beta = 5
		g := def
		if n := leadN[lead]; n > 0 {
			g = (leadB[lead] + beta*def) / (n + beta)
		}
		k := uint16(lead) | uint16(c1)<<8
		v := (st.charB[k] + beta*g) / (st.charN[k] + beta)
		return max(v-float64(size-2)*contWeight, 0)
	}
	for k := range 65536 {
		a, b := byte(k), byte(k>>8)
		ca, cb := kind(a), kind(b)
		switch {
		case (ca == kindASCII || ca == kindCont) && cb == kindASCII:
			pri := cB[byteClass(a)][byteClass(b)] / max(cN[byteClass(a)][byteClass(b)], 1e-9)
			if cN[byteClass(a)][byteClass(b)] == 0 {
				pri = 1
			}
			set(k, (st.pairB[k]+alpha*pri)/(st.pairN[k]+alpha))
			if isDigit(a) && isDigit(b) {
				// Both tokenizers cut numbers into groups of three
				// digits: a third of a token per digit is exact to
				// within one token per number, and never low.
				p.pairs[k] = (weightOne + 2) / 3
			}
		case ca == kindLead && cb == kindCont:
			set(k, charCost(a, b))
		case ca == kindCont && cb == kindCont:
			set(k, contWeight)
		case cb == kindLead:
			set(k, 0)
		case ca == kindLead:
			set(k, 2) // a truncated character: its lead byte, then b
		default:
			set(k, 1) // stray continuation or invalid bytes: a token each
		}
	}
	// Runs of spaces and tabs: a long synthetic run gives the cost per
	// byte inside a run; the rest of what runs cost in the training text
	// is the run's own cost.
	var startB, startN float64
	for _, c := range []byte{' ', '\t'} {
		long := strings.Repeat(string(rune(c)), 4096)
		rate := float64(tk.count(long)-1) / 4095
		set(int(c)|int(c)<<8, rate)
		startB += st.runB[c] - rate*st.runPairs[c]
		startN += st.runN[c]
	}
	p.runStart = uint16(math.Round(startB / startN * weightOne))
	return p
}

// Byte kinds for building the pair table.
const (
	kindASCII = iota
	kindCont
	kindLead
	kindInvalid
)

func kind(c byte) int {
	switch {
	case c < 0x80:
		return kindASCII
	case c < 0xC0:
		return kindCont
	case c >= 0xC2 && c <= 0xF4:
		return kindLead
	}
	return kindInvalid
}

// calibrate scales the learned weights so that on the training text the
// estimate under-counts by at most trainUnder on all but the worst
// percentile of each class: the learned weights are expected values, and
// a limiter needs an estimate that is rarely below the truth. Pairs of
// letters, the other ASCII pairs and runs, and multi-byte characters get
// a factor each: one factor for all ASCII would give prose the margin that
// code's punctuation needs.
func calibrate(t *testing.T, p *profile, classes []trainClass, chunks []trainChunk) {
	const (
		trainUnder = -0.09
		// Multi-byte text is learned from less of it: a wider margin.
		trainUnderMulti = -0.06
	)
	texts := make([]string, 0, len(chunks))
	for _, c := range classes {
		texts = append(texts, c.texts...)
	}
	for i := range chunks {
		chunks[i].letters, chunks[i].ascii, chunks[i].multi, chunks[i].fix = splitEstimate(p, texts[i])
	}
	isMulti := func(class int) bool {
		n := classes[class].name
		return n == "cjk" || n == "other" || n == "emoji"
	}
	quantile := func(kl, ka, km float64, class int, q float64) float64 {
		var errs []float64
		for _, c := range chunks {
			// Multi-byte calibration looks at the text that is mostly
			// multi-byte; the rest of those classes is ASCII's business.
			if c.class == class && (!isMulti(class) || c.multi > c.ascii+c.letters) {
				errs = append(errs, (c.fix+kl*c.letters+ka*c.ascii+km*c.multi)/c.tokens-1)
			}
		}
		sort.Float64s(errs)
		return errs[int(q*float64(len(errs)-1))]
	}
	// Random letters teach pairs but are no kind of text a prompt is
	// made of; calibrating on them would over-count prose.
	ascii := func(class int) bool { return !isMulti(class) && classes[class].name != "letters" }
	best, kl, ka := math.Inf(1), 0.0, 0.0
	for l := 0.80; l <= 1.40; l += 0.01 {
		for a := 0.80; a <= 1.40; a += 0.01 {
			ok, cost := true, 0.0
			for ci := range classes {
				if !ascii(ci) {
					continue
				}
				if quantile(l, a, 1, ci, 0.01) < trainUnder {
					ok = false
					break
				}
				cost += quantile(l, a, 1, ci, 0.5)
			}
			if ok && cost < best {
				best, kl, ka = cost, l, a
			}
		}
	}
	km := 0.0
	for ci := range classes {
		if !isMulti(ci) {
			continue
		}
		lo, hi := 0.5, 3.0
		for range 40 {
			if m := (lo + hi) / 2; quantile(kl, ka, m, ci, 0.01) < trainUnderMulti {
				lo = m
			} else {
				hi = m
			}
		}
		km = max(km, hi)
	}
	t.Logf("%s: letters ×%.2f, other ASCII ×%.2f, multi-byte ×%.3f", p.name, kl, ka, km)
	for ci, c := range classes {
		t.Logf("  %-7s p1 %+.3f median %+.3f", c.name, quantile(kl, ka, km, ci, 0.01), quantile(kl, ka, km, ci, 0.5))
	}
	for k := range p.pairs {
		a, b := byte(k), byte(k>>8)
		w := float64(p.pairs[k])
		switch pairPart(a, b) {
		case partLetters:
			w *= kl
		case partASCII:
			w *= ka
		case partMulti:
			w *= km
		}
		p.pairs[k] = uint16(min(math.Round(w), math.MaxUint16))
	}
	p.runStart = uint16(math.Round(float64(p.runStart) * ka))
}

// The parts of an estimate that calibration scales separately.
const (
	partFixed = iota
	partLetters
	partASCII
	partMulti
)

func pairPart(a, b byte) int {
	ca, cb := kind(a), kind(b)
	switch {
	case isDigit(a) && isDigit(b):
		return partFixed
	case isLetter(a) && isLetter(b):
		return partLetters
	case cb == kindASCII && (ca == kindASCII || ca == kindCont):
		return partASCII
	case ca == kindLead && cb == kindCont, ca == kindCont && cb == kindCont:
		return partMulti
	}
	return partFixed
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// splitEstimate returns p's estimate of s in tokens, split into the parts
// calibration scales.
func splitEstimate(p *profile, s string) (letters, ascii, multi, fix float64) {
	fix = 1
	n := len(s)
	for i := 1; i < n; {
		a, b := s[i-1], s[i]
		if a == b && isRunByte(b) && (i < 2 || s[i-2] != b) {
			ascii += float64(p.runStart) / weightOne
		}
		v := float64(p.pairs[uint16(a)|uint16(b)<<8]) / weightOne
		switch pairPart(a, b) {
		case partLetters:
			letters += v
		case partASCII:
			ascii += v
		case partMulti:
			multi += v
		default:
			fix += v
		}
		i++
	}
	return letters, ascii, multi, fix
}

// trainingText gathers the training classes; see the comment on
// generate for the sources.
func trainingText(t *testing.T) []trainClass {
	t.Helper()
	root := goEnv("GOROOT")
	goSrc := goFiles(t, func(p string) bool { return strings.HasSuffix(p, ".go") })
	var prose, code []string
	for i, p := range goSrc {
		if i%40 == 0 { // the accuracy corpus's code samples
			continue
		}
		if i%7 == 1 && filepath.Base(p) != "doc.go" {
			prose = append(prose, docComments(readFile(t, p)))
		}
		if i%13 == 5 {
			code = append(code, firstChunks(readFile(t, p), 3)...)
		}
	}
	for _, p := range []string{"doc/go_spec.html", "doc/go_mem.html", "doc/asm.html"} {
		if s, ok := optional(t, filepath.Join(root, p)); ok {
			prose = append(prose, stripTags(s))
		}
	}
	for _, pat := range []string{"/usr/share/doc/*/README*", "/usr/share/doc/*/*.txt"} {
		for _, p := range glob(pat) {
			if s, ok := optional(t, p); ok {
				prose = append(prose, s)
			}
		}
	}
	for _, p := range glob("/usr/lib/python3*/pydoc_data/topics.py") {
		if s, ok := optional(t, p); ok {
			prose = append(prose, pythonStrings(s))
		}
	}
	for i, p := range glob("/usr/lib/python3*/*.py") {
		if i%2 == 0 {
			if s, ok := optional(t, p); ok {
				code = append(code, firstChunks(s, 3)...)
			}
		}
	}
	for i, p := range glob("/usr/include/*.h") {
		if i%3 == 0 {
			if s, ok := optional(t, p); ok {
				code = append(code, firstChunks(s, 3)...)
			}
		}
	}
	var js []string
	filepath.WalkDir("/usr/lib/node_modules/npm/lib", func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".js") {
			js = append(js, p)
		}
		return nil
	})
	for i, p := range js {
		if i%5 == 0 {
			if s, ok := optional(t, p); ok {
				code = append(code, firstChunks(s, 3)...)
			}
		}
	}

	var cjk, other []string
	tutor := func(lang string) (string, bool) {
		return optional(t, "/usr/share/vim/vim90/tutor/tutor."+lang+".utf-8")
	}
	for _, lang := range []string{"ja", "zh_cn", "zh_tw", "ko"} {
		if s, ok := tutor(lang); ok {
			cjk = append(cjk, s)
		}
	}
	for _, lang := range []string{"zh", "ja", "ko"} {
		for _, p := range glob("/root/.rustup/toolchains/stable-*/share/doc/rust/html/rust-by-example/" + lang + "/print.html") {
			if s, ok := optional(t, p); ok {
				cjk = append(cjk, stripTags(s))
			}
			break
		}
	}
	gomod := strings.TrimSpace(goEnv("GOMODCACHE"))
	for _, name := range []string{"rashomon-utf-8.txt", "sunzi-bingfa-simplified-utf-8.txt", "unsu-joh-eun-nal-utf-8.txt"} {
		for _, p := range glob(filepath.Join(gomod, "golang.org/x/text@*/encoding/testdata", name)) {
			if s, ok := optional(t, p); ok {
				cjk = append(cjk, s)
			}
			break
		}
	}
	for _, lang := range strings.Fields("ru el bg uk sr vi tr pl cs de fr es eo hu it nl pt sv da sk") {
		if s, ok := tutor(lang); ok {
			other = append(other, s)
		}
	}
	if s, ok := optional(t, "/usr/share/mime/packages/freedesktop.org.xml"); ok {
		other = append(other, stripTags(s))
	}
	other = append(other, readFile(t, "testdata/train-scripts.txt"))

	classes := []trainClass{
		{"prose", cut(prose, 2048), 4},
		{"code", cut(code, 2048), 1},
		{"json", trainJSON(), 0.5},
		// Multi-byte characters are learned from these classes alone, so
		// their weight only matters for the ASCII between characters.
		{"cjk", cut(cjk, 1024), 0.2},
		{"other", cut(other, 1024), 0.2},
		{"emoji", trainEmoji(), 0.2},
		// Random strings teach rare pairs that they are token boundaries;
		// weighted low, since in a mixture they also raise the weights of
		// common pairs, which prose has far more of.
		{"random", trainRandom(randomAlphabets), 0.1},
		// Random single-case letters and punctuation: trained on, so that
		// rare letter pairs weigh more, but not calibrated on, since no
		// factor fits them without over-counting prose by half (they are
		// under-counted by about a third).
		{"letters", trainRandom(letterAlphabets), 0.02},
	}
	for _, c := range classes {
		t.Logf("training class %-7s %5d texts, %8d bytes", c.name, len(c.texts), totalLen(c.texts))
		if len(c.texts) == 0 {
			t.Fatalf("no training text for class %s", c.name)
		}
	}
	return classes
}

func glob(pat string) []string {
	m, _ := filepath.Glob(pat)
	sort.Strings(m)
	return m
}

// optional reads a training source (gzipped or not), logging when it is
// missing: each machine has its own.
func optional(t *testing.T, p string) (string, bool) {
	f, err := os.Open(p)
	if err != nil {
		t.Logf("skipping %s: %v", p, err)
		return "", false
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if strings.HasSuffix(p, ".gz") {
		z, err := gzip.NewReader(r)
		if err != nil {
			return "", false
		}
		r = z
	}
	b, err := io.ReadAll(r)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

var tagRE = regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]*>`)

func stripTags(s string) string { return html.UnescapeString(tagRE.ReplaceAllString(s, "")) }

// pythonStrings returns the text of a Python module made of string
// literals (pydoc's topics).
func pythonStrings(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		line = strings.TrimSpace(line)
		i, j := strings.IndexByte(line, '\''), strings.LastIndexByte(line, '\'')
		if i < 0 || j <= i {
			continue
		}
		r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\'`, "'", `\"`, `"`, `\\`, `\`)
		b.WriteString(r.Replace(line[i+1 : j]))
	}
	return b.String()
}

func firstChunks(s string, n int) []string {
	cs := chunks(s, "\n", sampleSize)
	return cs[:min(n, len(cs))]
}

// cut cuts texts into training pieces of about size bytes.
func cut(texts []string, size int) []string {
	var out []string
	for _, s := range texts {
		for _, c := range chunks(s, "\n", size) {
			if len(c) > 64 {
				out = append(out, c[:min(len(c), 4*size)])
			}
		}
	}
	return out
}

// trainJSON generates JSON unlike the accuracy corpus's: keys are words
// and identifiers, values longer, some documents compact.
func trainJSON() []string {
	r := rand.New(rand.NewPCG(70, 1))
	key := func() string {
		w := words[r.IntN(len(words))]
		switch r.IntN(4) {
		case 0:
			return w + "_" + words[r.IntN(len(words))]
		case 1:
			return w + strings.ToUpper(words[r.IntN(len(words))][:1]) + words[r.IntN(len(words))][1:]
		case 2:
			return string(rune('a'+r.IntN(26))) + []string{"", "id", "x", "n"}[r.IntN(4)]
		}
		return w
	}
	var value func(d int) any
	value = func(d int) any {
		switch k := r.IntN(11); {
		case k < 3:
			return r.Int64N(1 << (4 * (1 + r.IntN(8))))
		case k < 4:
			return math.Round(r.Float64()*[]float64{1, 100, 1e4}[r.IntN(3)]*1e4) / 1e4
		case k < 5:
			var ws []string
			for range 1 + r.IntN(6) {
				ws = append(ws, words[r.IntN(len(words))])
			}
			return strings.Join(ws, " ")
		case k < 6:
			return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
		case k < 7:
			return fmt.Sprintf("2024-%02d-%02dT%02d:%02d:%02d.%03dZ", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
		case k < 8:
			return r.IntN(2) == 0
		case k < 9 && d < 4:
			a := make([]any, 1+r.IntN(4))
			for i := range a {
				a[i] = value(d + 1)
			}
			return a
		case d < 4:
			m := map[string]any{}
			for range 1 + r.IntN(5) {
				m[key()] = value(d + 1)
			}
			return m
		}
		return nil
	}
	var out []string
	for i := range 300 {
		var doc []any
		for range 3 + r.IntN(10) {
			m := map[string]any{}
			for range 2 + r.IntN(6) {
				m[key()] = value(1)
			}
			doc = append(doc, m)
		}
		var b []byte
		if ind := []string{"  ", "    ", "\t", ""}[i%4]; ind == "" {
			b, _ = json.Marshal(doc)
		} else {
			b, _ = json.MarshalIndent(doc, "", ind)
		}
		out = append(out, string(b))
	}
	return cut(out, 2048)
}

// trainEmoji generates text with emoji drawn from all of Unicode's
// pictographic symbols, with modifiers, ZWJ sequences, flags and
// variation selectors.
func trainEmoji() []string {
	r := rand.New(rand.NewPCG(60, 1))
	var pics []rune
	for c := rune(0x2600); c < 0x27C0; c++ {
		if unicode.Is(unicode.So, c) {
			pics = append(pics, c)
		}
	}
	for c := rune(0x1F300); c < 0x1FB00; c++ {
		if unicode.Is(unicode.So, c) {
			pics = append(pics, c)
		}
	}
	one := func() string {
		e := string(pics[r.IntN(len(pics))])
		switch x := r.Float64(); {
		case x < 0.15:
			e += string(rune(0x1F3FB + r.IntN(5)))
		case x < 0.25:
			e += "\u200d" + string(pics[r.IntN(len(pics))])
		case x < 0.35:
			e += "\ufe0f"
		case x < 0.4:
			e = string(rune(0x1F1E6+r.IntN(26))) + string(rune(0x1F1E6+r.IntN(26)))
		}
		return e
	}
	var out []string
	for range 300 {
		var b strings.Builder
		density := r.Float64()
		for range 20 + r.IntN(180) {
			if r.Float64() < density {
				b.WriteString(strings.Repeat(one(), 1+r.IntN(3)*r.IntN(2)))
			} else {
				b.WriteString(words[r.IntN(len(words))])
			}
			if r.IntN(5) != 0 {
				b.WriteByte(' ')
			}
		}
		out = append(out, b.String())
	}
	return out
}

var (
	randomAlphabets = []string{
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
		"0123456789abcdef", "0123456789ABCDEF",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
		"0123456789", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
	}
	letterAlphabets = []string{
		"abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
		"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
		"abcdefghijklmnopqrstuvwxyz      ",
	}
)

// trainRandom generates random strings over the alphabets that carry
// identifiers, keys and encoded data.
func trainRandom(alphabets []string) []string {
	r := rand.New(rand.NewPCG(50, uint64(len(alphabets))))
	var out []string
	for _, a := range alphabets {
		for range 60 {
			b := make([]byte, 100+r.IntN(1900))
			for i := range b {
				b[i] = a[r.IntN(len(a))]
			}
			out = append(out, string(b))
		}
	}
	return out
}
