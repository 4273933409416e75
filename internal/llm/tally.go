package llm

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Part is one addend of a request's input estimate, as
// [ParseOptions.Explain] reports it.
type Part struct {
	// Name says what was counted, outermost first: "messages[2] user
	// text", "tools", "chat format overhead".
	Name string
	// Tokens is what it adds to Request.InputTokens.
	Tokens int64
	// Detail says how it was counted when that is not as plain text:
	// "detail high, 1024×768", "JSON text".
	Detail string
}

// DetailJSON is the detail of a part counted as its JSON text: a tool
// schema, a tool call's arguments, or a part of a kind the format does
// not know (high, but never free).
const DetailJSON = "JSON text"

// Tally adds up a request's input tokens, part by part, for a wire
// format's ParseRequest. When the parse explains itself
// ([ParseOptions.Explain]) each addition is reported as a [Part];
// otherwise a Tally is a sum and a nil check: no name is built and
// nothing is allocated, so the server's path pays nothing for the
// explanations.
//
// Names are built from the element being counted, set by [Tally.Enter]
// and [Tally.Within] (which return the name to restore with
// [Tally.Leave]), and what each addition is: an Add("text", n) inside
// Enter("messages", 2, m) is "messages[2] user text". Format overheads
// (message wrappers, reply priming) are summed apart with
// [Tally.Overhead] and reported as one part by [Tally.Done].
type Tally struct {
	explain  func(Part)
	total    int64
	overhead int64
	// item names the element being counted, and is "" outside any (and
	// always when not explaining).
	item string
}

// NewTally returns a Tally that reports its parts to explain, or, when
// explain is nil, only adds them up.
func NewTally(explain func(Part)) Tally { return Tally{explain: explain} }

// Explaining reports whether the parts are reported: a format builds a
// detail that needs formatting only then.
func (t *Tally) Explaining() bool { return t.explain != nil }

// Add counts n tokens of what, a part of the current element.
func (t *Tally) Add(what string, n int64) { t.AddDetail(what, n, "") }

// AddDetail counts n tokens of what, counted as detail says. Each "%d"
// in detail stands for the next of args, so that a detail with figures
// is built only when explaining; detail itself should be a constant.
func (t *Tally) AddDetail(what string, n int64, detail string, args ...int64) {
	t.total += n
	if t.explain == nil || n == 0 {
		return
	}
	t.explain(Part{Name: t.name(what), Tokens: n, Detail: fill(detail, args)})
}

// AddJSON counts n tokens of the JSON text of kind, a part whose kind
// comes from the body (the type of a content part the format does not
// know): kind is quoted in the name unless it is a plain word.
func (t *Tally) AddJSON(kind string, n int64) {
	t.total += n
	if t.explain == nil || n == 0 {
		return
	}
	t.explain(Part{Name: t.name(label(kind)), Tokens: n, Detail: DetailJSON})
}

// AddImage counts n tokens of an image of the given size in pixels (≤ 0
// when the request does not tell it), priced at detail ("low", "high",
// "auto" or "").
func (t *Tally) AddImage(what string, n int64, detail string, width, height int) {
	t.total += n
	if t.explain == nil || n == 0 {
		return
	}
	if detail == "" {
		detail = "auto"
	}
	d := "detail " + label(detail) + ", "
	if width > 0 && height > 0 {
		d += strconv.Itoa(width) + "×" + strconv.Itoa(height)
	} else {
		d += "size unknown"
	}
	t.explain(Part{Name: t.name(what), Tokens: n, Detail: d})
}

// Overhead counts n tokens the format adds around the content (message
// wrappers, a role, reply priming): they are reported together, by Done.
func (t *Tally) Overhead(n int64) {
	t.total += n
	t.overhead += n
}

// Done reports the overheads as one part, named name and counted as
// detail says (the format's rule), and returns the total: the request's
// InputTokens.
func (t *Tally) Done(name, detail string) int64 {
	if t.explain != nil && t.overhead != 0 {
		t.explain(Part{Name: name, Tokens: t.overhead, Detail: detail})
	}
	return t.total
}

// Enter names the parts added next after element index of list, and its
// role (or, without one, its type) when it has one: "messages[2] user".
// It returns the name to restore with Leave once the element is counted.
func (t *Tally) Enter(list string, index int, elem gjson.Result) (outer string) {
	if t.explain == nil {
		return ""
	}
	outer = t.item
	name := list + "[" + strconv.Itoa(index) + "]"
	l := elem.Get("role")
	if l.Type != gjson.String || l.Str == "" {
		l = elem.Get("type")
	}
	if l.Type == gjson.String && l.Str != "" {
		name += " " + label(l.Str)
	}
	t.item = t.name(name)
	return outer
}

// Within names the parts added next as parts of what, inside the current
// element: "messages[2] user tool_result". It returns the name to restore
// with Leave.
func (t *Tally) Within(what string) (outer string) {
	if t.explain == nil {
		return ""
	}
	outer = t.item
	t.item = t.name(what)
	return outer
}

// Leave restores the name Enter or Within returned.
func (t *Tally) Leave(outer string) { t.item = outer }

// name returns what, within the current element.
func (t *Tally) name(what string) string {
	switch {
	case t.item == "":
		return what
	case what == "":
		return t.item
	}
	return t.item + " " + what
}

// fill replaces each "%d" of detail with the next of args.
func fill(detail string, args []int64) string {
	if len(args) == 0 {
		return detail
	}
	var out []byte
	for i := 0; i < len(detail); i++ {
		if detail[i] == '%' && i+1 < len(detail) && detail[i+1] == 'd' && len(args) > 0 {
			out = strconv.AppendInt(out, args[0], 10)
			args = args[1:]
			i++
			continue
		}
		out = append(out, detail[i])
	}
	return string(out)
}

// label returns s, a name a client wrote (a role, a part's type), fit
// for a part's name: as it is when it is a plain word, else quoted and
// shortened, so that no body can make an explanation misleading or long.
func label(s string) string {
	if s == "" {
		return "(untyped)"
	}
	if plainKey([]byte(s)) {
		return s
	}
	return quoteKey([]byte(s))
}
