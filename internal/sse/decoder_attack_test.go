package sse

import "testing"

// Attacks on the framing around dataEvent, the decoder's fast path for an
// event of one data line: input that makes a line look like a data line
// when it is not, or carries state (a type, an ID, data already pending,
// a CR at the end of a Write) into an event that the fast path would
// dispatch without it. Each stream pins its events, which the reference
// decoder must produce too, and which must not depend on how the stream
// is cut into Writes (the fast path sees whole events only in some cuts).
func TestDataEventAttacks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		input string
		want  []event
	}{
		{name: "one data line", input: "data: x\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "no space", input: "data:x\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "two spaces", input: "data:  x\n\n", want: []event{{Data: " x", DataLen: 2}}},
		{name: "a tab", input: "data:\tx\n\n", want: []event{{Data: "\tx", DataLen: 2}}},
		{name: "empty data", input: "data:\n\ndata: \n\n", want: []event{{}, {}}},
		{name: "a name alone", input: "data\n\n", want: []event{{}}},
		{name: "a type, then a line of its own", input: "event: e\ndata: x\n\ndata: y\n\n",
			want: []event{{Type: "e", Data: "x", DataLen: 1}, {Data: "y", DataLen: 1}}},
		{name: "a type dropped by a blank line", input: "event: e\n\ndata: x\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "an ID kept", input: "id: 7\ndata: x\n\ndata: y\n\n",
			want: []event{{Data: "x", ID: "7", DataLen: 1}, {Data: "y", ID: "7", DataLen: 1}}},
		{name: "an ID with a NUL ignored", input: "id: 7\ndata: x\n\nid: 8\x00\ndata: y\n\n",
			want: []event{{Data: "x", ID: "7", DataLen: 1}, {Data: "y", ID: "7", DataLen: 1}}},
		{name: "data pending", input: "data: a\ndata: x\n\n", want: []event{{Data: "a\nx", DataLen: 3}}},
		{name: "data pending after a CR", input: "data: a\rdata: x\n\n", want: []event{{Data: "a\nx", DataLen: 3}}},
		{name: "CRLF then LF", input: "data: x\r\n\ndata: y\n\n", want: []event{{Data: "x", DataLen: 1}, {Data: "y", DataLen: 1}}},
		{name: "LF then CRLF", input: "data: x\n\r\ndata: y\n\n", want: []event{{Data: "x", DataLen: 1}, {Data: "y", DataLen: 1}}},
		{name: "LF then CR", input: "data: x\n\rdata: y\n\n", want: []event{{Data: "x", DataLen: 1}, {Data: "y", DataLen: 1}}},
		{name: "CR inside the line", input: "data: x\ry\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "three LFs", input: "data: x\n\n\ndata: y\n\n", want: []event{{Data: "x", DataLen: 1}, {Data: "y", DataLen: 1}}},
		{name: "a comment", input: ": data: x\n\n"},
		{name: "a comment before", input: ":\ndata: x\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "Data", input: "Data: x\n\n"},
		{name: "DATA", input: "DATA: x\n\n"},
		{name: "a space before the colon", input: "data : x\n\n"},
		{name: "a space before the name", input: " data: x\n\n"},
		{name: "a longer name", input: "datas: x\n\n"},
		{name: "a shorter name", input: "dat: x\n\n"},
		{name: "a NUL in the name", input: "data\x00: x\n\n"},
		{name: "a NUL in the data", input: "data: x\x00y\n\n", want: []event{{Data: "x\x00y", DataLen: 3}}},
		{name: "invalid UTF-8 in the data", input: "data: \xff\xfe\n\n", want: []event{{Data: "\xff\xfe", DataLen: 2}}},
		{name: "a retry line", input: "retry: 1\ndata: x\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "a byte order mark", input: "\xef\xbb\xbfdata: x\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "two byte order marks", input: "\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n"},
		{name: "a byte order mark later", input: "data: x\n\n\xef\xbb\xbfdata: y\n\n", want: []event{{Data: "x", DataLen: 1}}},
		{name: "no blank line", input: "data: x\n"},
		{name: "no line end", input: "data: x"},
		{name: "at the bound", max: 3, input: "data: abc\n\n", want: []event{{Data: "abc", DataLen: 3}}},
		{name: "past the bound", max: 3, input: "data: abcd\n\n", want: []event{{Data: "abc", DataLen: 4, Truncated: true}}},
		{name: "past the bound with two spaces", max: 3, input: "data:  abc\n\n", want: []event{{Data: " ab", DataLen: 4, Truncated: true}}},
		{name: "at the bound after a short event", max: 3, input: "data: a\n\ndata: abc\n\ndata: abcd\n\n",
			want: []event{{Data: "a", DataLen: 1}, {Data: "abc", DataLen: 3}, {Data: "abc", DataLen: 4, Truncated: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{MaxEventBytes: tc.max}
			in := []byte(tc.input)
			checkEvents(t, "whole", decode(t, opts, in), tc.want)
			checkEvents(t, "reference decoder", referenceDecode(in, tc.max), tc.want)
			checkSplitInvariance(t, opts, in, tc.want)
		})
	}
}
