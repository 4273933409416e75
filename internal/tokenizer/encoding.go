package tokenizer

import (
	"strings"
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Encoding names: the two BPE vocabularies of current OpenAI models.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
)

// modelPrefixes maps model-name prefixes to encodings, longest first so
// that "gpt-4o" wins over "gpt-4". tiktoken-go's own table lacks o3,
// o4-mini, gpt-4.1 and gpt-5, and resolves overlapping prefixes in map
// order; this one is explicit.
var modelPrefixes = []struct{ prefix, encoding string }{
	{"chatgpt-4o", O200kBase},
	{"gpt-4o", O200kBase},
	{"gpt-4.1", O200kBase},
	{"gpt-4.5", O200kBase},
	{"gpt-5", O200kBase},
	{"gpt-oss", O200kBase},
	{"codex-", O200kBase},
	{"computer-use", O200kBase},
	{"omni-moderation", O200kBase},
	{"o1", O200kBase},
	{"o3", O200kBase},
	{"o4", O200kBase},
	{"gpt-4", Cl100kBase},
	{"gpt-35-turbo", Cl100kBase}, // Azure's spelling
	{"gpt-3.5-turbo", Cl100kBase},
	{"text-embedding-3", Cl100kBase},
	{"text-embedding-ada-002", Cl100kBase},
}

// EncodingForModel returns the BPE encoding an OpenAI model uses, or ""
// for a model without a public tokenizer. It ignores a provider prefix
// ("openai/gpt-4o"), a fine-tune prefix ("ft:gpt-4o-mini:org::id") and
// case.
func EncodingForModel(model string) string {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	m = strings.TrimPrefix(m, "ft:")
	if m == "" {
		return ""
	}
	for _, p := range modelPrefixes {
		// The first byte rules out most prefixes without a call.
		if m[0] == p.prefix[0] && strings.HasPrefix(m, p.prefix) && boundary(m, len(p.prefix)) {
			return p.encoding
		}
	}
	return ""
}

// boundary reports whether a model-name prefix of length n ends at a
// name boundary, so that "o1" matches "o1-mini" but not "o1x". The table
// lists "gpt-4o" and "gpt-4.1" before "gpt-4", so "gpt-4" needs no
// exceptions.
func boundary(m string, n int) bool {
	if n == len(m) || m[n-1] == '-' {
		return true
	}
	c := m[n]
	return !('a' <= c && c <= 'z' || '0' <= c && c <= '9')
}

// encodings loads each BPE vocabulary at most once per process, on first
// use: building o200k_base takes about 0.3 s and 22 MB of heap
// (cl100k_base 0.13 s, 11 MB), a cost a server using only the
// approximation should never pay. The loaded
// encoder is immutable and safe for concurrent use.
var encodings = map[string]func() (*tiktoken.Tiktoken, error){
	O200kBase:  sync.OnceValues(func() (*tiktoken.Tiktoken, error) { return loadEncoding(O200kBase) }),
	Cl100kBase: sync.OnceValues(func() (*tiktoken.Tiktoken, error) { return loadEncoding(Cl100kBase) }),
}

// setLoader installs the offline loader into tiktoken-go, whose loader is
// a package variable: set once, before the first encoding is built, so
// that nothing is ever fetched over the network.
var setLoader = sync.OnceFunc(func() {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
})

func loadEncoding(name string) (*tiktoken.Tiktoken, error) {
	setLoader()
	return tiktoken.GetEncoding(name)
}

// encoding returns the loaded encoder for name ("o200k_base" or
// "cl100k_base").
func encoding(name string) (*tiktoken.Tiktoken, error) {
	load, ok := encodings[name]
	if !ok {
		return nil, errUnknownEncoding(name)
	}
	return load()
}

type errUnknownEncoding string

func (e errUnknownEncoding) Error() string { return "unknown encoding " + string(e) }
