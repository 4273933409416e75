package openai

import (
	"encoding/binary"
	"math"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// exactChat parses the usual chat request in a pass of its own, quicker
// than scanChat's because it knows the shape: an object whose keys are
// plain lower-case ASCII, each once, whose messages are objects of such
// keys in which role and name are strings, and content a string, null,
// or an array of text and image_url parts. It reads those as scanChat
// does, and checks every other value as the check does, against the
// value's own Fields (llm.ValueChecker). It reports false for a body
// of any other shape, or with any fault, and scanChat then parses it from
// the start: a body it leaves costs its pass, and the counts of the
// messages it read, and no more. Its pass costs no more than scanChat's
// (a message's keys are compared one by one, so few are taken; see
// exactKeys), so a body built to be left at its last byte costs at most
// about twice what scanChat alone would.
//
// Keys of plain lower-case ASCII are why it needs none of the check's
// folding: two such keys fold to one only when they are the same bytes,
// and none is another case of a field's name, since every name chat
// declares is one of them. FuzzChatScan and FuzzExactChatShapes hold it
// to scanChat and to CheckBody: the same request, the same error, for
// every body it takes.
func exactChat(body []byte, opts llm.ParseOptions) (llm.Request, bool, error) {
	b := body
	i := ws(b, 0)
	if i >= len(b) || uint64(len(b)) >= math.MaxUint32 || b[i] != '{' {
		return llm.Request{}, false, nil
	}
	var v chatScan
	v.body, v.t = body, llm.NewTally(nil)
	if opts.Model != "" {
		v.ready(opts, opts.Model)
	}
	// The values exactChat does not read itself are checked with one
	// checker, which keeps its tables from one value to the next.
	var vc llm.ValueChecker
	var top [len(chatNames)]gjson.Result
	keys := exactKeys{max: maxTopKeys}
	var members uint64 // the bits of the chat fields the body has
	i, more := first(b, i, '}')
	for more {
		key, j, ok := exactKey(b, i)
		if !ok || !keys.add(key) {
			return llm.Request{}, false, nil
		}
		k := exactTopField(key)
		var end int
		switch k {
		case topMessages:
			end, ok = v.exactMessages(b, j, &vc)
		case -1:
			end, ok = exactValue(b, j, 1, &vc, nil)
		default:
			end, ok = exactValue(b, j, 1, &vc, chatInner[k])
		}
		if !ok {
			return llm.Request{}, false, nil
		}
		if k >= 0 {
			top[k] = llm.ResultAt(b, j, end)
			members |= chatFieldBits[k]
			if m := top[k]; k == topModel && !v.known && m.Type == gjson.String && m.Str != "" {
				// The messages after the model are counted as they are
				// read, as scanChat counts them.
				v.ready(opts, m.Str)
			}
		}
		if i, more, ok = after(b, end, '}'); !ok {
			return llm.Request{}, false, nil
		}
	}
	if ws(b, i) != len(b) || !top[topMessages].IsArray() {
		// Something after the body, or no messages: errors, which
		// scanChat words.
		return llm.Request{}, false, nil
	}
	req, err := v.finish(&top, llm.ShapeWith(body, chatFields, members), opts)
	return req, true, err
}

// The indexes in chatNames of the fields exactChat reads in a way of
// their own.
var (
	topModel    = exactTopField("model")
	topMessages = exactTopField("messages")
)

// chatInner has the Fields of the value of each of chatNames: those the
// check reads it against (nil for a value read whole).
var chatInner = func() (inner [len(chatNames)]*llm.Fields) {
	for k, name := range chatNames {
		inner[k] = chatFields.Inner(name)
	}
	return inner
}()

// chatFieldBits has the Shape bit (1<<Slot) of each of chatNames.
var chatFieldBits = func() (bits [len(chatNames)]uint64) {
	for k, name := range chatNames {
		bits[k] = 1 << chatFields.Slot(name)
	}
	return bits
}()

// exactTopField returns the index in chatNames of key, or -1.
func exactTopField(key string) int {
	for k, name := range chatNames {
		if key == name {
			return k
		}
	}
	return -1
}

// exactMessages reads the messages array at i and notes each message's
// counts, as scanChat's visits do, and returns where the array ends.
func (v *chatScan) exactMessages(b []byte, i int, vc *llm.ValueChecker) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return exactScalar(b, i) // null, say: not an array, which finish refuses
	}
	i, more := first(b, i, ']')
	for more {
		end, ok := v.exactMessage(b, i, vc)
		if !ok {
			return end, false
		}
		v.messages++
		if i, more, ok = after(b, end, ']'); !ok {
			return i, false
		}
	}
	return i, true
}

// exactMessage reads the message at i and notes its counts.
func (v *chatScan) exactMessage(b []byte, i int, vc *llm.ValueChecker) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	// The message's role, name and content, and its fields counted as
	// JSON in v's json, each when its bit (1<<field, see messageKey) is
	// in seen; the keys of its other members are in v's others.
	var vals [fieldToolCalls]llm.Value
	var seen uint
	v.others.n, v.others.max = 0, maxOtherKeys
	i, more := first(b, i, '}')
	for more {
		key, k, j, ok := messageKey(b, i)
		if !ok {
			return i, false
		}
		if k >= 0 {
			if seen&(1<<k) != 0 {
				return i, false // a repeat
			}
			seen |= 1 << k
		}
		var end int
		var escaped bool
		switch {
		case k == fieldContent && j < len(b) && b[j] == '[':
			end, ok = v.exactParts(b, j)
		case k == fieldContent && hasNull(b, j):
			end = j + len("null")
		case k == fieldRole || k == fieldName || k == fieldContent:
			end, escaped, ok = llm.StringEnd(b, j)
		case k < 0:
			if !v.others.add(key) {
				return i, false
			}
			end, ok = exactValue(b, j, 3, vc, nil)
		default:
			// Counted as JSON, whatever it is.
			end, ok = exactValue(b, j, 3, vc, messageInner[k])
		}
		if !ok {
			return j, false
		}
		switch val := (llm.Value{Raw: llm.View(b[j:end]), Index: j, Escaped: escaped}); {
		case k >= fieldToolCalls:
			v.json[k-fieldToolCalls] = val
		case k >= 0:
			vals[k] = val
		}
		if i, more, ok = after(b, end, '}'); !ok {
			return i, false
		}
	}
	v.noteMessage(vals[fieldRole], vals[fieldName], vals[fieldContent])
	if seen>>fieldToolCalls != 0 {
		for k := fieldToolCalls; k < numMessageFields; k++ {
			if seen&(1<<k) != 0 {
				v.noteValue(countJSON, v.json[k-fieldToolCalls])
			}
		}
	}
	v.messageDone()
	return i, true
}

// exactParts reads the content array at i, of text and image_url parts,
// and notes their counts as scanChat's visits do, and returns where it
// ends. A part of any other shape is left to scanChat: one of another
// type, or with other members, or whose type has an escape.
func (v *chatScan) exactParts(b []byte, i int) (int, bool) {
	i, more := first(b, i, ']')
	for more {
		end, ok := v.exactPart(b, i)
		if !ok {
			return end, false
		}
		if i, more, ok = after(b, end, ']'); !ok {
			return i, false
		}
	}
	return i, true
}

// exactPart reads the content part at i and notes its counts.
func (v *chatScan) exactPart(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	var typ, text, url, detail llm.Value
	image := false // the part has an image_url
	i, more := first(b, i, '}')
	for more {
		key, j, ok := exactKey(b, i)
		if !ok {
			return i, false
		}
		var end int
		var val *llm.Value
		switch key {
		case "type":
			val = &typ
		case "text":
			val = &text
		case "image_url":
			if image {
				return i, false
			}
			image = true
			end, ok = exactImage(b, j, &url, &detail)
		default:
			return i, false
		}
		if val != nil {
			if val.Raw != "" {
				return i, false
			}
			var escaped bool
			if end, escaped, ok = llm.StringEnd(b, j); ok {
				*val = llm.Value{Raw: llm.View(b[j:end]), Index: j, Escaped: escaped}
			}
		}
		if !ok {
			return j, false
		}
		if i, more, ok = after(b, end, '}'); !ok {
			return i, false
		}
	}
	switch {
	case typ.Raw == `"text"` && !image && text.Raw != "":
	case typ.Raw == `"image_url"` && image && text.Raw == "":
	default:
		return i, false
	}
	v.notePart(typ.Raw[1:len(typ.Raw)-1], text, url, detail)
	return i, true
}

// exactImage reads the image_url object at i, of a url and a detail,
// strings, into url and detail, and returns where it ends.
func exactImage(b []byte, i int, url, detail *llm.Value) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	i, more := first(b, i, '}')
	for more {
		key, j, ok := exactKey(b, i)
		if !ok {
			return i, false
		}
		var val *llm.Value
		switch key {
		case "url":
			val = url
		case "detail":
			val = detail
		default:
			return i, false
		}
		end, escaped, ok := llm.StringEnd(b, j)
		if !ok || val.Raw != "" {
			return j, false
		}
		*val = llm.Value{Raw: llm.View(b[j:end]), Index: j, Escaped: escaped}
		if i, more, ok = after(b, end, '}'); !ok {
			return i, false
		}
	}
	return i, url.Raw != ""
}

// messageKey is exactKey for a message's key, and says which of the
// message's fields it is (see fieldRole), or -1 for another key. Role,
// name and content, written compactly, are told by a word of eight
// bytes.
func messageKey(b []byte, i int) (string, int, int, bool) {
	if i+10 <= len(b) {
		switch binary.LittleEndian.Uint64(b[i:]) {
		case wordRole:
			return "role", fieldRole, i + len(`"role":`), true
		case wordName:
			return "name", fieldName, i + len(`"name":`), true
		case wordContent:
			if b[i+8] == '"' && b[i+9] == ':' {
				return "content", fieldContent, ws(b, i+len(`"content":`)), true
			}
		}
	}
	key, j, ok := exactKey(b, i)
	k := -1
	switch key {
	case "role":
		k = fieldRole
	case "name":
		k = fieldName
	case "content":
		k = fieldContent
	case "tool_calls":
		k = fieldToolCalls
	case "function_call":
		k = fieldFunctionCall
	case "refusal":
		k = fieldRefusal
	case "audio":
		k = fieldAudio
	}
	return key, k, j, ok
}

// The fields of a message messageKey tells: role, name and content, then
// those counted as JSON, in the order scanChat counts them.
const (
	fieldRole = iota
	fieldName
	fieldContent
	fieldToolCalls
	fieldFunctionCall
	fieldRefusal
	fieldAudio
	numMessageFields
)

// messageInner has the Fields of the value of each of a message's fields
// messageKey tells: those the check reads it against.
var messageInner = func() (inner [numMessageFields]*llm.Fields) {
	for k, name := range [numMessageFields]string{"role", "name", "content", "tool_calls", "function_call", "refusal", "audio"} {
		inner[k] = chatMessageFields.Inner(name)
	}
	return inner
}()

// The first eight bytes of a message's usual members, as messageKey
// loads them.
var (
	wordRole    = binary.LittleEndian.Uint64([]byte(`"role":"`))
	wordName    = binary.LittleEndian.Uint64([]byte(`"name":"`))
	wordContent = binary.LittleEndian.Uint64([]byte(`"content`))
)

// first reads past the opening bracket at i and the space after it, and
// reports whether a member or an element follows; if the closer does
// instead, the object or array is empty, and i is past it.
func first(b []byte, i int, closer byte) (int, bool) {
	if i = ws(b, i+1); i < len(b) && b[i] == closer {
		return i + 1, false
	}
	return i, true
}

// after reads past the member or element that ends at end: a comma and
// the space around it, and then more is set and i is where the next one
// starts; or the closer, and i is past it. ok is false for anything
// else.
func after(b []byte, end int, closer byte) (i int, more, ok bool) {
	i = ws(b, end)
	switch {
	case i < len(b) && b[i] == ',':
		return ws(b, i+1), true, true
	case i < len(b) && b[i] == closer:
		return i + 1, false, true
	}
	return i, false, false
}

// exactKeys are the keys of an object exactChat reads, to find a repeat
// by comparing each new key with every earlier one. An object with more
// than max is left to scanChat, whose check compares a key with a hash:
// the body's own object may have a couple of dozen keys, and is read
// once; a message has a few, but a body may hold any number of messages,
// so the keys of a message that exactChat compares one by one are kept
// few (maxOtherKeys).
type exactKeys struct {
	n, max int
	keys   [maxTopKeys]string
}

// How many keys exactKeys holds: in the body's own object, and in a
// message besides its fields (those messageKey tells).
const (
	maxTopKeys   = 24
	maxOtherKeys = 6
)

// add adds key, and reports false for a repeat, or a key too many.
func (k *exactKeys) add(key string) bool {
	for _, earlier := range k.keys[:k.n] {
		if key == earlier {
			return false
		}
	}
	if k.n == k.max {
		return false
	}
	k.keys[k.n] = key
	k.n++
	return true
}

// exactKey reads the key at i, which must be plain lower-case ASCII
// (letters, digits, underscores), and its colon, and returns it and where
// its value starts.
func exactKey(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	j := i + 1
	for j < len(b) && keyByte[b[j]] {
		j++
	}
	if j == i+1 || j >= len(b) || b[j] != '"' {
		return "", i, false
	}
	key := llm.View(b[i+1 : j])
	if j = ws(b, j+1); j >= len(b) || b[j] != ':' {
		return "", i, false
	}
	return key, ws(b, j+1), true
}

// keyByte is set for the bytes of a key exactKey reads.
var keyByte = func() (t [256]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
	}
	return t
}()

// exactScalar reads the string, number, true, false or null at i, as the
// check does, and returns where it ends; it reports false for an object
// or an array.
func exactScalar(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		end, _, ok := llm.StringEnd(b, i)
		return end, ok
	case 't':
		return i + 4, hasLiteral(b, i, "true")
	case 'f':
		return i + 5, hasLiteral(b, i, "false")
	case 'n':
		return i + 4, hasNull(b, i)
	case '{', '[':
		return i, false
	}
	return llm.NumberEnd(b, i)
}

// exactValue reads any value at i, inside outer open objects and arrays,
// as the check reads the value of a member that fields describe.
func exactValue(b []byte, i, outer int, vc *llm.ValueChecker, fields *llm.Fields) (int, bool) {
	if i+1 < len(b) && (b[i] == '{' && b[i+1] == '}' || b[i] == '[' && b[i+1] == ']') {
		return i + 2, true // empty, and never too deep: outer is below MaxDepth
	}
	if i < len(b) && (b[i] == '{' || b[i] == '[') {
		return vc.Check(b, i, outer, fields)
	}
	return exactScalar(b, i)
}

func hasNull(b []byte, i int) bool { return hasLiteral(b, i, "null") }

func hasLiteral(b []byte, i int, lit string) bool {
	return i+len(lit) <= len(b) && string(b[i:i+len(lit)]) == lit
}

// ws skips JSON whitespace at i; compact JSON, the usual kind, has none,
// which one comparison tells.
func ws(b []byte, i int) int {
	if i < len(b) && b[i] <= ' ' {
		return llm.SkipSpace(b, i)
	}
	return i
}
