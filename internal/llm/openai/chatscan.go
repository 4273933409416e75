package openai

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// scanChat parses a chat request in one pass: the check of the body
// (llm.Scan) stops after each message, each content array and each
// content part, and what walkChat would count there is noted while the
// check's reading of them is at hand, instead of walking the messages
// again once the check is done. A long conversation is read once.
//
// What it counts is counted as walkChat counts it, string by string, so
// that the estimates are equal: the same strings, decoded the same way,
// counted by the same counter, and the same overheads. The counter
// depends on the model, which the body may name after its messages (the
// Python SDK sends "messages" first): the strings are then noted, as
// spans of the body, and counted once the model is known.
func scanChat(body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var s llm.Scan
	s.Start(body, chatFields, chatNames[:]...)
	var v chatScan // set field by field, not copied from a temporary
	v.body, v.t = body, llm.NewTally(nil)
	if opts.Model != "" {
		v.ready(opts, opts.Model)
	}
	for s.Next() {
		if !v.known {
			if m := s.Top(0); m.Type == gjson.String && m.Str != "" {
				v.ready(opts, m.Str)
			}
		}
		v.visit(&s)
	}
	if err := s.Err(); err != nil {
		return llm.Request{}, err
	}
	var top [len(chatNames)]gjson.Result
	for k := range top {
		top[k] = s.Top(k)
	}
	return v.finish(&top, s.Shape(), opts)
}

// finish parses the request once the body has been checked and its
// messages noted: top holds the fields chatNames names, and shape is the
// body's Shape.
func (v *chatScan) finish(top *[len(chatNames)]gjson.Result, shape llm.Shape, opts llm.ParseOptions) (llm.Request, error) {
	f := top[2:]
	req, err := topRequest(top[0], top[1], opts)
	if err != nil {
		return req, err
	}
	if req.ServiceTier, err = llm.OptionalString(f[8], "service_tier"); err != nil {
		return req, err
	}
	if !f[0].IsArray() {
		return req, errors.New("messages must be an array")
	}
	if v.objects != v.messages {
		return req, errNotObjectMessage
	}
	if !v.known {
		v.ready(opts, req.Model)
	}
	v.flush()
	req.Shape = shape
	return finishChat(req, f, &v.tc, &v.t, opts)
}

// The slots of the fields a chat scan reads in the objects it visits.
var (
	slotRole         = chatMessageFields.Slot("role")
	slotName         = chatMessageFields.Slot("name")
	slotContent      = chatMessageFields.Slot("content")
	slotToolCalls    = chatMessageFields.Slot("tool_calls")
	slotFunctionCall = chatMessageFields.Slot("function_call")
	slotRefusal      = chatMessageFields.Slot("refusal")
	slotAudio        = chatMessageFields.Slot("audio")
	slotType         = chatContentFields.Slot("type")
	slotText         = chatContentFields.Slot("text")
	slotImageURL     = chatContentFields.Slot("image_url")
	slotURL          = chatImageFields.Slot("url")
	slotDetail       = chatImageFields.Slot("detail")
)

// The depths of what a chat scan visits: the body is 1, its messages
// array 2, a message 3, a content array 4, a content part 5.
const (
	depthMessages     = 2
	depthMessage      = 3
	depthContentArray = 4
	depthContentPart  = 5
	depthImage        = 6
)

// chatScan is what scanChat notes as the check visits the messages.
type chatScan struct {
	body []byte
	t    llm.Tally
	// tc counts the text once the model is known, which known says;
	// until then the strings to count wait in pending.
	tc    textCounter
	known bool
	// The counts noted and not done: those of the current message's
	// content parts, until its content array closes and shows they
	// stand; and all of them while the model is unknown. There are
	// npending, the first in pending, which holds a usual request's on
	// the stack, the rest in more.
	npending int
	pending  [32]pendingCount
	more     []pendingCount
	// messages is the number of elements of the messages array, objects
	// the number of messages that are objects.
	messages, objects int
	// parts is the number of object parts of the content array being
	// read, whose counts begin at pending[partsFrom].
	parts, partsFrom int
	// image is the last image_url object read, for the part it is in.
	image struct {
		start       int
		url, detail llm.Value
	}
	// others are the keys of the message exactChat reads, other than its
	// fields, and json the values of its fields counted as JSON.
	others exactKeys
	json   [numMessageFields - fieldToolCalls]llm.Value
}

// pendingCount is a count noted in a chat scan: what to count, and the
// span of the body it is in.
type pendingCount struct {
	kind       countKind
	escaped    bool
	start, end uint32
}

// countKind says how a pendingCount is counted.
type countKind uint8

const (
	countText    countKind = iota // a JSON string's text
	countEmpty                    // the text "", which a value that is not a string has
	countJSON                     // the JSON text itself
	countDetail                   // an image's detail, the text of the next count's image
	countImage                    // an image, whose URL is the text
	countContent                  // a content array, walked as walkChat walks it
)

// ready makes the scan's text counter, for model.
func (v *chatScan) ready(opts llm.ParseOptions, model string) {
	v.tc = textCounter{counter: opts.TokenCounter(), model: model, text: llm.NewTextCounter(opts.Counter, model)}
	v.known = true
}

// visit reads what the scan stopped after, if it is part of a message.
// Anything else visited (messages that are not an array, which the parse
// refuses) is let be.
func (v *chatScan) visit(s *llm.Scan) {
	vis := s.Visited()
	switch {
	case vis.Depth == depthImage && vis.Fields == chatImageFields && !vis.Array:
		v.image.start = vis.Start
		v.image.url, _ = s.Member(slotURL)
		v.image.detail, _ = s.Member(slotDetail)
	case vis.Depth == depthContentPart && vis.Fields == chatContentFields && !vis.Array:
		v.part(s, vis)
	case vis.Depth == depthContentArray && vis.Fields == chatContentFields && vis.Array:
		if vis.Elements != v.parts {
			// A part that is not an object: the array is counted
			// as walkChat counts it, part by part.
			v.npending = v.partsFrom
			v.note(countContent, false, vis.Start, vis.End)
		}
		v.parts, v.partsFrom = 0, v.npending
	case vis.Depth == depthMessage && vis.Fields == chatMessageFields && !vis.Array:
		v.message(s)
		v.messageDone()
	case vis.Depth == depthMessages && vis.Fields == chatMessageFields && vis.Array:
		v.messages = vis.Elements
	}
}

// message notes the counts of a message, as walkChat's walk over its
// members makes them; its content parts, if any, were noted as they
// closed.
func (v *chatScan) message(s *llm.Scan) {
	role, _ := s.Member(slotRole)
	name, _ := s.Member(slotName)
	content, _ := s.Member(slotContent)
	v.noteMessage(role, name, content)
	// Most messages have none of the fields counted as JSON: one test
	// for the four.
	if s.Members()&jsonMemberSlots == 0 {
		return
	}
	for _, slot := range [...]int{slotToolCalls, slotFunctionCall, slotRefusal, slotAudio} {
		if m, ok := s.Member(slot); ok {
			v.noteValue(countJSON, m)
		}
	}
}

// noteMessage notes the counts of a message's role, name and content, as
// walkChat makes them; a field the message lacks is the zero Value.
func (v *chatScan) noteMessage(role, name, content llm.Value) {
	v.objects++
	v.t.Overhead(tokensPerMessage)
	if role.Raw != "" {
		v.t.Overhead(1)
	}
	if name.Raw != "" {
		v.t.Overhead(tokensPerName)
		v.noteText(countText, name)
	}
	if content.Raw != "" {
		switch content.Raw[0] {
		case '"':
			v.noteValue(countText, content)
		case '[', 'n':
			// Parts, noted already; or null, which costs nothing.
		default:
			v.noteValue(countJSON, content)
		}
	}
}

// messageDone follows a message noted: its counts are done now if the
// model is known.
func (v *chatScan) messageDone() {
	if v.known {
		v.flush()
	}
	v.parts, v.partsFrom = 0, v.npending
}

// jsonMemberSlots has the bits (llm.Scan.Members) of the fields of a
// message counted as JSON.
var jsonMemberSlots = uint64(1)<<slotToolCalls | 1<<slotFunctionCall | 1<<slotRefusal | 1<<slotAudio

// part notes the count of a content part that is an object, as
// contentTokens makes it.
func (v *chatScan) part(s *llm.Scan, vis *llm.Visited) {
	v.parts++
	typ := ""
	if m, ok := s.Member(slotType); ok && m.Raw[0] == '"' {
		typ = m.Text()
	}
	var text, url, detail llm.Value
	switch typ {
	case "text":
		text, _ = s.Member(slotText)
	case "image_url":
		// The image_url object was visited just before its part; a
		// part whose image_url is not an object has no URL or detail,
		// as gjson reads it.
		if m, ok := s.Member(slotImageURL); ok && m.Raw[0] == '{' && m.Index == v.image.start {
			url, detail = v.image.url, v.image.detail
		}
	}
	if !v.notePart(typ, text, url, detail) {
		v.note(countJSON, false, vis.Start, vis.End)
	}
}

// notePart notes the counts of a content part of type typ, with its text,
// or its image's URL and detail; it reports false for a part of another
// type, which is counted as JSON.
func (v *chatScan) notePart(typ string, text, url, detail llm.Value) bool {
	switch typ {
	case "text":
		v.noteText(countText, text)
	case "image_url":
		v.noteText(countDetail, detail)
		v.noteText(countImage, url)
	default:
		return false
	}
	return true
}

// noteText notes a count of kind of the text of a member, read as
// gjson's Str: a string's text, or "" for any other value or none.
func (v *chatScan) noteText(kind countKind, m llm.Value) {
	if m.Raw == "" || m.Raw[0] != '"' {
		if kind == countText {
			kind = countEmpty
		}
		v.note(kind, false, 0, 0)
		return
	}
	v.noteValue(kind, m)
}

// noteValue notes a count of the value m.
func (v *chatScan) noteValue(kind countKind, m llm.Value) {
	v.note(kind, m.Escaped, m.Index, m.Index+len(m.Raw))
}

func (v *chatScan) note(kind countKind, escaped bool, start, end int) {
	p := pendingCount{kind: kind, escaped: escaped, start: uint32(start), end: uint32(end)}
	if k := v.npending; k < len(v.pending) {
		v.pending[k] = p
	} else {
		v.more = append(v.more[:k-len(v.pending)], p)
	}
	v.npending++
}

// flush counts what is pending.
func (v *chatScan) flush() {
	tc, t := &v.tc, &v.t
	detail := ""
	for k := range v.npending {
		var p pendingCount
		if k < len(v.pending) {
			p = v.pending[k]
		} else {
			p = v.more[k-len(v.pending)]
		}
		raw := llm.View(v.body[p.start:p.end])
		switch p.kind {
		case countText:
			t.Add("", tc.count(llm.Value{Raw: raw, Escaped: p.escaped}.Text()))
		case countEmpty:
			t.Add("", tc.count(""))
		case countJSON:
			t.Add("", tc.count(raw))
		case countDetail:
			detail = text(raw, p.escaped)
		case countImage:
			tc.image(t, "image_url", detail, text(raw, p.escaped))
		case countContent:
			contentTokens(gjson.Result{Type: gjson.JSON, Raw: raw, Index: int(p.start)}, tc, t)
		}
	}
	v.npending = 0
}

// text returns the text of raw, a string a pending count spans, or ""
// for a count of no span.
func text(raw string, escaped bool) string {
	if raw == "" {
		return ""
	}
	return llm.Value{Raw: raw, Escaped: escaped}.Text()
}
