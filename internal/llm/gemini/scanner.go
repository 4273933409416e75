package gemini

import (
	"bytes"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// maxCapture bounds a captured usageMetadata object. Real ones are a few
// hundred bytes (a modality breakdown at most); a larger one is skipped.
const maxCapture = 64 << 10

// keyKind is a key the scanner acts on.
type keyKind uint8

const (
	keyOther  keyKind = iota
	keyUsage          // usageMetadata: capture the object that follows
	keyText           // text: count the string that follows as output
	keyFinish         // finishReason: the response is complete
	keyCall           // functionCall: count the object that follows as output
)

// maxKey is the longest key the scanner needs to recognise, and
// maxRawKey the longest it may be written as: with every character
// escaped (\u0075 for u), as a client decodes it.
const (
	maxKey    = len("usage_metadata")
	maxRawKey = 6 * maxKey
)

// Scanner follows a JSON body incrementally: a single GenerateContentResponse
// object or the array of them that streamGenerateContent sends without
// alt=sse. It validates nothing and keeps no more than one usageMetadata
// object: it tracks nesting and strings byte by byte, hands each complete
// usageMetadata object of a top-level response (at depth 1, or depth 2
// inside the top-level array) to OnUsage, the contents of every "text" string
// to OnText in pieces (escapes lose their backslash and are not otherwise
// decoded) followed by OnTextEnd, every "functionCall" object the same way,
// raw (the model wrote its arguments: the SSE reader counts them as JSON
// too),
// and reads keys as JSON does, escapes decoded ("usage\u004detadata" is
// usageMetadata),
// and reports "finishReason" keys to OnFinish. A response with more than
// one usageMetadata member (under either name) is reported to
// OnRepeatedUsage, at the second: clients read such a response
// differently.
// Malformed input cannot make it fail or grow; it just stops finding
// things.
type Scanner struct {
	OnUsage   func(obj []byte)
	OnText    func(piece []byte)
	OnTextEnd func()
	OnFinish  func()
	// OnRepeatedUsage, if set, is called at a top-level response's second
	// usageMetadata member.
	OnRepeatedUsage func()

	depth  int
	arrays uint64 // bit d-1 set: the container at depth d (≤ 64) is an array

	inStr  bool
	esc    bool
	strKey bool // the current string is an object key
	text   bool // the current string is a "text" value
	keyBuf [maxRawKey]byte
	keyLen int  // > maxRawKey once the key is too long to be one we want
	keyEsc bool // the key has an escape

	expectKey bool    // a string here would be a key
	lastKey   keyKind // the key whose ':' may come next
	colonKey  keyKind // the key whose value comes next (set at ':')

	// callDepth > 0: inside the functionCall object opened at this
	// depth, whose bytes go to OnText.
	callDepth int

	capDepth int // > 0: capturing the object opened at this depth
	capBuf   []byte
	capOver  bool

	usageSeen bool // the current response has shown a usageMetadata member
}

func (s *Scanner) isArray(d int) bool {
	return d >= 1 && d <= 64 && s.arrays>>(d-1)&1 == 1
}

func (s *Scanner) push(array bool) {
	s.depth++
	if s.depth <= 64 {
		bit := uint64(1) << (s.depth - 1)
		if array {
			s.arrays |= bit
		} else {
			s.arrays &^= bit
		}
	}
}

// responseLevel reports whether an object key at the current depth
// belongs to a top-level response: the body itself, or an element of the
// top-level array.
func (s *Scanner) responseLevel() bool {
	return s.depth == 1 && !s.isArray(1) || s.depth == 2 && s.isArray(1) && !s.isArray(2)
}

// Write feeds the next bytes of the body.
func (s *Scanner) Write(p []byte) {
	for i := 0; i < len(p); {
		if s.inStr {
			i = s.str(p, i)
			continue
		}
		c := p[i]
		if s.capDepth > 0 {
			s.capture(p[i : i+1])
		}
		if s.callDepth > 0 {
			s.callBytes(p[i : i+1])
		}
		i++
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			s.inStr, s.keyLen, s.keyEsc = true, 0, false
			s.strKey = s.expectKey
			s.text = !s.strKey && s.colonKey == keyText && s.callDepth == 0
			s.expectKey, s.colonKey = false, keyOther
		case ':':
			s.colonKey, s.lastKey = s.lastKey, keyOther
			if s.colonKey == keyFinish && s.OnFinish != nil {
				s.OnFinish()
			}
			if s.colonKey == keyUsage && s.responseLevel() {
				if s.usageSeen && s.OnRepeatedUsage != nil {
					s.OnRepeatedUsage()
				}
				s.usageSeen = true
			}
		case ',':
			s.expectKey = !s.isArray(s.depth)
			s.colonKey, s.lastKey = keyOther, keyOther
		case '{':
			if s.colonKey == keyUsage && s.capDepth == 0 && s.responseLevel() {
				s.capDepth, s.capOver = s.depth+1, false
				s.capBuf = append(s.capBuf[:0], '{')
			}
			if s.colonKey == keyCall && s.callDepth == 0 {
				s.callDepth = s.depth + 1
				s.callBytes(p[i-1 : i])
			}
			s.push(false)
			if s.responseLevel() {
				s.usageSeen = false // a new response
			}
			s.expectKey, s.colonKey, s.lastKey = true, keyOther, keyOther
		case '[':
			s.push(true)
			s.expectKey, s.colonKey, s.lastKey = false, keyOther, keyOther
		case '}', ']':
			if s.depth > 0 {
				if s.capDepth == s.depth {
					s.capDepth = 0
					if !s.capOver && s.OnUsage != nil {
						s.OnUsage(s.capBuf)
					}
				}
				if s.callDepth == s.depth {
					s.callDepth = 0
					if s.OnTextEnd != nil {
						s.OnTextEnd()
					}
				}
				s.depth--
			}
			s.expectKey, s.colonKey, s.lastKey = false, keyOther, keyOther
		default:
			// A number or literal: the value after a key is consumed.
			s.colonKey, s.lastKey = keyOther, keyOther
		}
	}
}

// str consumes string bytes from p[i:] and returns where it stopped: after
// the closing quote, or at the end of p.
func (s *Scanner) str(p []byte, i int) int {
	if s.esc {
		s.esc = false
		s.strByte(p[i : i+1])
		return i + 1
	}
	j := stringStop(p[i:])
	if j < 0 {
		s.strByte(p[i:])
		return len(p)
	}
	s.strByte(p[i : i+j])
	c := p[i+j]
	if s.capDepth > 0 {
		s.capture(p[i+j : i+j+1])
	}
	if s.callDepth > 0 {
		s.callBytes(p[i+j : i+j+1])
	}
	if c == '\\' {
		s.esc = true
		if s.strKey {
			// The key is decoded whole, at its end: keep the backslash.
			s.keyEsc = true
			s.keyBytes(p[i+j : i+j+1])
		}
		return i + j + 1
	}
	s.inStr = false
	if s.strKey {
		s.lastKey = s.matchKey()
	}
	if s.text && s.OnTextEnd != nil {
		s.OnTextEnd()
	}
	s.text = false
	return i + j + 1
}

// stringStop returns the index of the first quote or backslash in b, or
// -1. bytes.IndexAny builds its byte set on every call and tests each
// byte against it; two IndexByte scans (the second only up to the
// quote) are vectorized, and most strings hold no backslash.
func stringStop(b []byte) int {
	q := bytes.IndexByte(b, '"')
	end := q
	if q < 0 {
		end = len(b)
	}
	if k := bytes.IndexByte(b[:end], '\\'); k >= 0 {
		return k
	}
	return q
}

// strByte handles a run of string content.
func (s *Scanner) strByte(b []byte) {
	if len(b) == 0 {
		return
	}
	if s.capDepth > 0 {
		s.capture(b)
	}
	if s.callDepth > 0 {
		s.callBytes(b)
	}
	switch {
	case s.strKey:
		s.keyBytes(b)
	case s.text && s.OnText != nil:
		s.OnText(b)
	}
}

// keyBytes notes a run of a key's raw bytes.
func (s *Scanner) keyBytes(b []byte) {
	if s.keyLen+len(b) <= maxRawKey {
		copy(s.keyBuf[s.keyLen:], b)
		s.keyLen += len(b)
	} else {
		s.keyLen = maxRawKey + 1
	}
}

func (s *Scanner) matchKey() keyKind {
	if s.keyLen > maxRawKey {
		return keyOther
	}
	key := s.keyBuf[:s.keyLen]
	if s.keyEsc {
		var scratch [maxRawKey]byte
		key = llm.BytesView(llm.DecodeJSONString(key, scratch[:]))
	}
	switch string(key) {
	case "usageMetadata", "usage_metadata":
		return keyUsage
	case "text":
		return keyText
	case "finishReason", "finish_reason":
		return keyFinish
	case "functionCall", "function_call":
		return keyCall
	}
	return keyOther
}

// callBytes hands a run of a functionCall object's bytes to OnText.
func (s *Scanner) callBytes(b []byte) {
	if s.OnText != nil {
		s.OnText(b)
	}
}

func (s *Scanner) capture(b []byte) {
	if s.capOver {
		return
	}
	if len(s.capBuf)+len(b) > maxCapture {
		s.capOver = true
		return
	}
	s.capBuf = append(s.capBuf, b...)
}
