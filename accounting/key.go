package accounting

import (
	"strconv"
	"strings"
	"time"
)

// KeyPrefix starts every counter key, so that a shared Redis can tell
// tokenwarden's keys apart and a format change can bump the version. (2:
// counters are packed doubles in Redis, no longer hashes; replicas of
// either version sharing a Redis during an upgrade keep apart, and the
// counters start afresh.)
const KeyPrefix = "tw2:"

// CounterKey returns the store key of limit l's counter for attrs.
//
// Values are used verbatim and may hold any bytes, so each is written with
// its length in front: "len:value". No separator inside a value can then
// be mistaken for a boundary, and two different tuples (tenant "a:b" with
// user "c", tenant "a" with user "b:c") never share a key. The algorithm
// and the window length are part of the key so that changing either
// starts a fresh counter instead of misreading the old one's state (a
// sliding window's slot numbers, say, mean nothing under another length).
// Changing the limit value keeps the counter.
func CounterKey(l *Limit, attrs Attributes) string {
	var b strings.Builder
	b.Grow(counterKeySize(l, attrs))
	writeCounterKey(&b, l, attrs)
	return b.String()
}

// counterKeySize is the length of CounterKey(l, attrs), so that a key
// (or a reservation's keys together) is built in one allocation.
func counterKeySize(l *Limit, attrs Attributes) int {
	n := len(KeyPrefix) + len(algorithmCode(l.Algorithm, l.Calendar)) + 1 + fieldSize(len(l.Name))
	if l.Calendar == NoCalendar {
		n += decimalDigits(l.Window.Milliseconds())
	}
	if l.Location != nil && l.Location != time.UTC && l.Calendar != NoCalendar {
		n += 1 + len(l.Location.String())
	}
	for _, name := range l.Scope {
		v, _ := attrs.Get(name)
		n += fieldSize(len(name)) + fieldSize(len(v))
	}
	return n
}

// fieldSize is the length writeField writes for a string of n bytes.
func fieldSize(n int) int {
	return decimalDigits(int64(n)) + 1 + n
}

// decimalDigits is the length of v in decimal, its sign included.
func decimalDigits(v int64) int {
	n := 1
	if v < 0 {
		n++
	}
	for v >= 10 || v <= -10 {
		v /= 10
		n++
	}
	return n
}

// writeCounterKey writes CounterKey(l, attrs) to b. Each part of the
// key's head and each field's length go through a buffer on the stack
// and reach b in one write: this runs for every limit of every request.
func writeCounterKey(b *strings.Builder, l *Limit, attrs Attributes) {
	var buf [64]byte
	head := append(buf[:0], KeyPrefix...)
	head = append(head, algorithmCode(l.Algorithm, l.Calendar)...)
	if l.Calendar == NoCalendar {
		head = strconv.AppendInt(head, l.Window.Milliseconds(), 10)
	}
	if l.Location != nil && l.Location != time.UTC && l.Calendar != NoCalendar {
		// Another zone's days are other windows: a fresh counter.
		head = append(head, '@')
		head = append(head, l.Location.String()...)
	}
	head = append(head, ':')
	b.Write(appendFieldHead(head, len(l.Name)))
	b.WriteString(l.Name)
	for _, name := range l.Scope {
		v, _ := attrs.Get(name)
		writeField(b, name)
		writeField(b, v)
	}
}

func writeField(b *strings.Builder, s string) {
	var buf [24]byte
	b.Write(appendFieldHead(buf[:0], len(s)))
	b.WriteString(s)
}

// appendFieldHead appends what writeField writes before a string of n
// bytes: n in decimal and a colon.
func appendFieldHead(dst []byte, n int) []byte {
	switch {
	case n < 10:
		return append(dst, byte('0'+n), ':')
	case n < 100:
		return append(dst, byte('0'+n/10), byte('0'+n%10), ':')
	}
	return append(strconv.AppendInt(dst, int64(n), 10), ':')
}

func algorithmCode(a Algorithm, c Calendar) string {
	switch {
	case a == FixedWindow && c == CalendarMonth:
		return "fm"
	case a == FixedWindow && c == CalendarDay:
		return "fd"
	case a == FixedWindow:
		return "f"
	case a == TokenBucket:
		return "b"
	case a == Leases:
		return "c"
	case a == Lifetime:
		return "l"
	}
	// 'w': a sliding window's value changed its layout ('s' before),
	// which earlier versions sharing a Redis would misread.
	return "w"
}

// KeyScopeValue returns the value of scope attribute name in counter key
// key (built by [CounterKey]), and whether the key's scope holds it.
//
// It reads the key's fields by their lengths, as [ScopeValues] does, so a
// value can never be mistaken for an attribute name: what it returns is
// the value the key was built from. A store that places keys by one
// attribute (redisstore's shard_by) uses it to find a counter's principal
// from its key alone. A key it cannot read (not one of CounterKey's)
// reports false.
func KeyScopeValue(key, name string) (string, bool) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", false
	}
	// The header (algorithm, window, zone) ends at the first ':'; an
	// IANA zone name holds none.
	i := strings.IndexByte(rest, ':')
	if i < 0 {
		return "", false
	}
	if _, rest, ok = readField(rest[i+1:]); !ok {
		// The limit's name.
		return "", false
	}
	for rest != "" {
		var attr, v string
		if attr, rest, ok = readField(rest); !ok {
			return "", false
		}
		if v, rest, ok = readField(rest); !ok {
			return "", false
		}
		if attr == name {
			return v, true
		}
	}
	return "", false
}
