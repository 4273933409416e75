package sse

import (
	"bytes"
	"fmt"
)

// event is an Event copied out of its callback, comparable with ==.
type event struct {
	Type, Data, ID string
	DataLen        int
	Truncated      bool
}

func (e event) String() string {
	return fmt.Sprintf("{Type:%q Data:%.80q ID:%q DataLen:%d Truncated:%v}", e.Type, e.Data, e.ID, e.DataLen, e.Truncated)
}

func copyEvent(e Event) event {
	return event{Type: string(e.Type), Data: string(e.Data), ID: string(e.ID), DataLen: e.DataLen, Truncated: e.Truncated}
}

// referenceDecode is a deliberately naive decoder that transcribes the WHATWG steps
// literally: whole stream in memory, split into lines first, a data buffer with a
// trailing LF removed at dispatch. It shares no code with Decoder, so agreement between
// the two is evidence, and the fuzz target uses it as its oracle. The bounds are applied
// when an event is emitted, which is what Decoder must be equivalent to.
func referenceDecode(stream []byte, maxData int) []event {
	if maxData <= 0 {
		maxData = DefaultMaxEventBytes
	}
	stream = bytes.TrimPrefix(stream, bom[:])
	var (
		out            []event
		data, typ, id  []byte
		truncate       = func(b []byte, n int) []byte { return b[:min(len(b), n)] }
		isLineEnd      = func(c byte) bool { return c == '\r' || c == '\n' }
		nextLineLength = func(s []byte) int {
			for i, c := range s {
				if isLineEnd(c) {
					return i
				}
			}
			return -1
		}
	)
	for {
		i := nextLineLength(stream)
		if i < 0 {
			return out // an unterminated last line, and any pending event, is discarded
		}
		line := stream[:i]
		if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
			i++
		}
		stream = stream[i+1:]

		if len(line) == 0 {
			if len(data) == 0 {
				data, typ = nil, nil
				continue
			}
			data = bytes.TrimSuffix(data, []byte("\n"))
			out = append(out, event{
				Type:      string(truncate(typ, MaxFieldBytes)),
				Data:      string(truncate(data, maxData)),
				ID:        string(truncate(id, MaxFieldBytes)),
				DataLen:   len(data),
				Truncated: len(data) > maxData,
			})
			data, typ = nil, nil
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(name) {
		case "data":
			data = append(append(data, value...), '\n')
		case "event":
			typ = append([]byte(nil), value...)
		case "id":
			if !bytes.Contains(value, []byte{0}) {
				id = append([]byte(nil), value...)
			}
		}
	}
}
