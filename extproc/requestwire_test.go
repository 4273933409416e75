package extproc

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestRequestFieldNumbers(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  protowire.Number
		msg  proto.Message
	}{
		{"request_headers", fieldReqRequestHeaders, &extprocv3.ProcessingRequest{}},
		{"response_headers", fieldReqResponseHeaders, &extprocv3.ProcessingRequest{}},
		{"request_body", fieldReqRequestBody, &extprocv3.ProcessingRequest{}},
		{"response_body", fieldReqResponseBody, &extprocv3.ProcessingRequest{}},
		{"request_trailers", fieldReqRequestTrailers, &extprocv3.ProcessingRequest{}},
		{"response_trailers", fieldReqResponseTrailers, &extprocv3.ProcessingRequest{}},
		{"observability_mode", fieldReqObservability, &extprocv3.ProcessingRequest{}},
		{"protocol_config", fieldReqProtocolConfig, &extprocv3.ProcessingRequest{}},
		{"attributes", fieldReqAttributes, &extprocv3.ProcessingRequest{}},
		{"fields", fieldStructFields, &structpb.Struct{}},
		{"null_value", fieldValueNull, &structpb.Value{}},
		{"number_value", fieldValueNumber, &structpb.Value{}},
		{"string_value", fieldValueString, &structpb.Value{}},
		{"bool_value", fieldValueBool, &structpb.Value{}},
		{"headers", fieldHTTPHeadersMap, &extprocv3.HttpHeaders{}},
		{"end_of_stream", fieldHTTPHeadersEOS, &extprocv3.HttpHeaders{}},
		{"body", fieldHTTPBodyBody, &extprocv3.HttpBody{}},
		{"end_of_stream", fieldHTTPBodyEOS, &extprocv3.HttpBody{}},
		{"end_of_stream_without_message", fieldHTTPBodyEOSNoMsg, &extprocv3.HttpBody{}},
		{"grpc_message_compressed", fieldHTTPBodyCompressed, &extprocv3.HttpBody{}},
		{"drain_complete", fieldHTTPBodyDrainDone, &extprocv3.HttpBody{}},
		{"trailers", fieldHTTPTrailersMap, &extprocv3.HttpTrailers{}},
		{"headers", fieldHeaderMapHeaders, &corev3.HeaderMap{}},
		{"key", fieldHeaderKey, &corev3.HeaderValue{}},
		{"value", fieldHeaderValue, &corev3.HeaderValue{}},
		{"raw_value", fieldHeaderRawValue, &corev3.HeaderValue{}},
		{"request_body_mode", fieldConfigRequestMode, &extprocv3.ProtocolConfiguration{}},
		{"response_body_mode", fieldConfigResponseMode, &extprocv3.ProtocolConfiguration{}},
		{"send_body_without_waiting_for_header_response", fieldConfigSendNoWaiting, &extprocv3.ProtocolConfiguration{}},
	} {
		d := tc.msg.ProtoReflect().Descriptor()
		f := d.Fields().ByName(protoreflect.Name(tc.name))
		if f == nil || f.Number() != tc.got {
			t.Errorf("%s.%s: got field number %d, want the descriptor's (%v)", d.FullName(), tc.name, tc.got, f)
		}
	}
	attrs := (&extprocv3.ProcessingRequest{}).ProtoReflect().Descriptor().Fields().ByNumber(fieldReqAttributes)
	if k, v := attrs.MapKey().Number(), attrs.MapValue().Number(); k != fieldMapKey || v != fieldMapValue {
		t.Errorf("a map entry's key and value: got fields %d and %d, want %d and %d", fieldMapKey, fieldMapValue, k, v)
	}
}

// TestRequestFieldsKnown: the hand decoder reads every field of the
// messages it decodes but the ones it leaves to protobuf-go on purpose.
// A field that a newer go-control-plane adds fails here, to be decoded
// or listed: decoded by protobuf-go, it would make the hand decoder
// useless for messages that carry it, and nothing else would say so.
func TestRequestFieldsKnown(t *testing.T) {
	handled := map[protoreflect.FullName]map[protowire.Number]bool{
		"envoy.service.ext_proc.v3.ProcessingRequest": {
			fieldReqRequestHeaders: true, fieldReqResponseHeaders: true, fieldReqRequestBody: true,
			fieldReqResponseBody: true, fieldReqRequestTrailers: true, fieldReqResponseTrailers: true,
			fieldReqObservability: true, fieldReqProtocolConfig: true, fieldReqAttributes: true,
			8:  false, // metadata_context: Envoy sends it only when the filter config asks
			12: false, // flow_control_init: Envoy's flow-controlled streaming, not used
			13: false, // client_window_update: likewise
		},
		"envoy.service.ext_proc.v3.HttpHeaders": {fieldHTTPHeadersMap: true, fieldHTTPHeadersEOS: true,
			2: false, // attributes: deprecated, Envoy sends them on the ProcessingRequest
		},
		"envoy.service.ext_proc.v3.HttpBody": {fieldHTTPBodyBody: true, fieldHTTPBodyEOS: true,
			fieldHTTPBodyEOSNoMsg: true, fieldHTTPBodyCompressed: true, fieldHTTPBodyDrainDone: true},
		"envoy.service.ext_proc.v3.HttpTrailers":          {fieldHTTPTrailersMap: true},
		"envoy.config.core.v3.HeaderMap":                  {fieldHeaderMapHeaders: true},
		"envoy.config.core.v3.HeaderValue":                {fieldHeaderKey: true, fieldHeaderValue: true, fieldHeaderRawValue: true},
		"envoy.service.ext_proc.v3.ProtocolConfiguration": {fieldConfigRequestMode: true, fieldConfigResponseMode: true, fieldConfigSendNoWaiting: true},
		"google.protobuf.Struct":                          {fieldStructFields: true},
		"google.protobuf.Value": {fieldValueNull: true, fieldValueNumber: true, fieldValueString: true, fieldValueBool: true,
			5: false, // struct_value: no attribute Envoy sends is one
			6: false, // list_value: likewise
		},
	}
	for _, m := range []proto.Message{&extprocv3.ProcessingRequest{}, &extprocv3.HttpHeaders{}, &extprocv3.HttpBody{},
		&extprocv3.HttpTrailers{}, &corev3.HeaderMap{}, &corev3.HeaderValue{}, &extprocv3.ProtocolConfiguration{},
		&structpb.Struct{}, &structpb.Value{}} {
		d := m.ProtoReflect().Descriptor()
		fields := d.Fields()
		for i := range fields.Len() {
			f := fields.Get(i)
			if _, ok := handled[d.FullName()][f.Number()]; !ok {
				t.Errorf("%s.%s (%d): a field the hand decoder neither reads nor leaves to protobuf-go on purpose", d.FullName(), f.Name(), f.Number())
			}
		}
	}
}

// sameDecode decodes b by hand and with proto.Unmarshal, into messages
// that start as start makes them, and says how the two differ.
// proto.Equal does not tell a nil byte slice from an empty one, so the
// raw values' and the body's are compared too.
func sameDecode(b []byte, start func(*extprocv3.ProcessingRequest)) error {
	got, want := &extprocv3.ProcessingRequest{}, &extprocv3.ProcessingRequest{}
	if start != nil {
		start(got)
		start(want)
	}
	gotErr, wantErr := decodeRequest(b, got), proto.Unmarshal(b, want)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		return fmt.Errorf("got error %v, want %v", gotErr, wantErr)
	case wantErr != nil:
		return nil
	case !proto.Equal(got, want):
		return fmt.Errorf("got\n%s\nwant\n%s", prototext.Format(got), prototext.Format(want))
	}
	maps := func(m *extprocv3.ProcessingRequest) []*corev3.HeaderMap {
		return []*corev3.HeaderMap{m.GetRequestHeaders().GetHeaders(), m.GetResponseHeaders().GetHeaders(),
			m.GetRequestTrailers().GetTrailers(), m.GetResponseTrailers().GetTrailers()}
	}
	wm := maps(want)
	for i, gm := range maps(got) {
		for j, h := range gm.GetHeaders() {
			if w := wm[i].GetHeaders()[j].RawValue; (h.RawValue == nil) != (w == nil) {
				return fmt.Errorf("header %d of map %d: got raw value %#v, want %#v", j, i, h.RawValue, w)
			}
		}
	}
	// Nor a nil map, or a nil message in a map, from an empty one, nor
	// -0 from 0 or one NaN from another.
	if (got.Attributes == nil) != (want.Attributes == nil) {
		return fmt.Errorf("got attributes %v, want %v", got.Attributes, want.Attributes)
	}
	for k, ws := range want.Attributes {
		gs := got.Attributes[k]
		if (gs == nil) != (ws == nil) || (gs.GetFields() == nil) != (ws.GetFields() == nil) {
			return fmt.Errorf("attributes %q: got %#v, want %#v", k, gs, ws)
		}
		for f, wv := range ws.GetFields() {
			gv := gs.GetFields()[f]
			if (gv == nil) != (wv == nil) {
				return fmt.Errorf("attributes %q, field %q: got %v, want %v", k, f, gv, wv)
			}
			if g, w := math.Float64bits(gv.GetNumberValue()), math.Float64bits(wv.GetNumberValue()); g != w {
				return fmt.Errorf("attributes %q, field %q: got number bits %x, want %x", k, f, g, w)
			}
		}
	}
	for _, pair := range [][2]*extprocv3.HttpBody{{got.GetRequestBody(), want.GetRequestBody()}, {got.GetResponseBody(), want.GetResponseBody()}} {
		if g, w := pair[0].GetBody(), pair[1].GetBody(); (g == nil) != (w == nil) {
			return fmt.Errorf("got body %#v, want %#v", g, w)
		}
	}
	return nil
}

// Wire-building helpers for the cases proto.Marshal cannot write: a
// field repeated, present but empty, of the wrong type, or unknown.
func wireBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func wireVarint(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func wireHeaderValue(fields ...[]byte) []byte { return bytes.Join(fields, nil) }

// attrEntry is an attributes entry of a ProcessingRequest: name, and a
// Struct whose encoding is fields. field is one of a Struct's fields,
// stringValue a Value holding s.
func attrEntry(name string, fields []byte) []byte {
	return wireBytes(nil, fieldReqAttributes, wireBytes(wireBytes(nil, fieldMapKey, []byte(name)), fieldMapValue, fields))
}

func field(key string, value []byte) []byte {
	return wireBytes(nil, fieldStructFields, wireBytes(wireBytes(nil, fieldMapKey, []byte(key)), fieldMapValue, value))
}

func stringValue(s string) []byte { return wireBytes(nil, fieldValueString, []byte(s)) }

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// requestWireCases are encodings of Envoy's messages, and of what Envoy
// does not send, with whether the hand decoder decodes them itself.
func requestWireCases(t testing.TB) []struct {
	name string
	b    []byte
	fast bool
} {
	kv := func(k, v string) []byte {
		return wireHeaderValue(wireBytes(nil, fieldHeaderKey, []byte(k)), wireBytes(nil, fieldHeaderRawValue, []byte(v)))
	}
	headerMap := func(values ...[]byte) []byte {
		var b []byte
		for _, v := range values {
			b = wireBytes(b, fieldHeaderMapHeaders, v)
		}
		return b
	}
	requestHeaders := func(hm []byte, rest ...[]byte) []byte {
		h := wireBytes(nil, fieldHTTPHeadersMap, hm)
		for _, r := range rest {
			h = append(h, r...)
		}
		return wireBytes(nil, fieldReqRequestHeaders, h)
	}
	structAttrs := mustMarshal(t, &extprocv3.ProcessingRequest{
		Attributes: map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{
			"response.code_details": structpb.NewStringValue("via_upstream")}}}})
	cases := []struct {
		name string
		b    []byte
		fast bool
	}{
		{"empty", nil, true},
		{"request headers, raw values", requestHeaders(headerMap(kv(":path", "/v1/chat/completions"), kv("x-tenant-id", "t1"))), true},
		{"request headers, end of stream", requestHeaders(headerMap(kv(":method", "GET")), wireVarint(nil, fieldHTTPHeadersEOS, 1)), true},
		{"end of stream, a long varint", requestHeaders(headerMap(kv(":method", "GET")), wireVarint(nil, fieldHTTPHeadersEOS, 1<<60)), true},
		{"end of stream, then not", requestHeaders(nil, wireVarint(nil, fieldHTTPHeadersEOS, 1), wireVarint(nil, fieldHTTPHeadersEOS, 0)), true},
		{"header values as strings", requestHeaders(headerMap(wireHeaderValue(wireBytes(nil, fieldHeaderKey, []byte("a")), wireBytes(nil, fieldHeaderValue, []byte("b"))))), true},
		{"a header present but empty", requestHeaders(headerMap(nil, kv("", ""))), true},
		{"a raw value present but empty", requestHeaders(headerMap(wireHeaderValue(wireBytes(nil, fieldHeaderKey, []byte("k")), wireBytes(nil, fieldHeaderRawValue, nil)))), true},
		{"a key repeated: the last wins", requestHeaders(headerMap(wireHeaderValue(wireBytes(nil, fieldHeaderKey, []byte("first")), wireBytes(nil, fieldHeaderKey, []byte("second")), wireBytes(nil, fieldHeaderRawValue, []byte("v"))), kv("next", "w"))), true},
		{"a key, then an empty one", requestHeaders(headerMap(wireHeaderValue(wireBytes(nil, fieldHeaderKey, []byte("k")), wireBytes(nil, fieldHeaderKey, nil)))), true},
		{"a raw value, then an empty one", requestHeaders(headerMap(wireHeaderValue(wireBytes(nil, fieldHeaderRawValue, []byte("v")), wireBytes(nil, fieldHeaderRawValue, nil)))), true},
		{"raw values are bytes, not UTF-8", requestHeaders(headerMap(kv("k", "\xff\xfe"))), true},
		{"an empty header map", requestHeaders(nil), true},
		{"no header map", wireBytes(nil, fieldReqRequestHeaders, nil), true},
		{"many headers", requestHeaders(headerMap(func() [][]byte {
			var hs [][]byte
			for i := range 200 {
				hs = append(hs, kv(fmt.Sprintf("x-header-%d", i), fmt.Sprint(i)))
			}
			return hs
		}()...)), true},
		{"long keys and values", requestHeaders(headerMap(kv(strings.Repeat("k", 300), strings.Repeat("v", 70000)), kv("x", strings.Repeat("w", 128)))), true},
		// A 199-byte key, its length two bytes (c7 01), whose last byte
		// and the raw value's tag read as a shorter header's to a
		// decoder that took c7 for the whole length.
		{"a key that mimics a shorter header", requestHeaders(headerMap(kv(strings.Repeat("k", 198)+"\x1a", strings.Repeat("r", 25)))), true},
		{"response headers", mustMarshal(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}}), true},
		{"request body", mustMarshal(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(`{"model":"m"}`), EndOfStream: true}}}), true},
		{"response body, every flag", mustMarshal(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
			Body: []byte("data: {}\n\n"), EndOfStream: true, EndOfStreamWithoutMessage: true, GrpcMessageCompressed: true, DrainComplete: true}}}), true},
		{"a body present but empty", wireBytes(nil, fieldReqRequestBody, wireBytes(nil, fieldHTTPBodyBody, nil)), true},
		{"a body repeated: the last wins", wireBytes(nil, fieldReqResponseBody, wireBytes(wireBytes(nil, fieldHTTPBodyBody, []byte("one")), fieldHTTPBodyBody, []byte("two"))), true},
		{"a body, then an empty one", wireBytes(nil, fieldReqResponseBody, wireBytes(wireBytes(nil, fieldHTTPBodyBody, []byte("one")), fieldHTTPBodyBody, nil)), true},
		{"request trailers", mustMarshal(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{
			Trailers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: "x-checksum", RawValue: []byte("1")}}}}}}), true},
		{"response trailers, empty", wireBytes(nil, fieldReqResponseTrailers, nil), true},
		{"protocol config and observability mode", mustMarshal(t, &extprocv3.ProcessingRequest{
			Request:           &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}},
			ObservabilityMode: true,
			ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_BUFFERED,
				ResponseBodyMode: filterv3.ProcessingMode_STREAMED, SendBodyWithoutWaitingForHeaderResponse: true}}), true},
		{"body modes out of range", wireBytes(nil, fieldReqProtocolConfig, wireVarint(wireVarint(nil, fieldConfigRequestMode, 99), fieldConfigResponseMode, math.MaxUint64)), true},
		{"a body mode past 32 bits", wireBytes(nil, fieldReqProtocolConfig, wireVarint(nil, fieldConfigRequestMode, 1<<33+1)), true},
		{"observability mode, then not", wireVarint(wireVarint(nil, fieldReqObservability, 7), fieldReqObservability, 0), true},
		{"protocol config after the headers", append(requestHeaders(headerMap(kv("a", "b"))), wireBytes(nil, fieldReqProtocolConfig, wireVarint(nil, fieldConfigRequestMode, 1))...), true},

		{"attributes of every scalar kind", mustMarshal(t, &extprocv3.ProcessingRequest{Attributes: map[string]*structpb.Struct{
			"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{
				"response.code_details": structpb.NewStringValue("via_upstream"), "response.code": structpb.NewNumberValue(200),
				"upstream.tls": structpb.NewBoolValue(true), "x": structpb.NewNullValue(), "empty": structpb.NewStringValue(""),
				"nan": structpb.NewNumberValue(math.NaN()), "-0": structpb.NewNumberValue(math.Copysign(0, -1)),
				"inf": structpb.NewNumberValue(math.Inf(-1)), "nothing": {}}},
			"other": {}}}), true},
		{"an attribute's key repeated: the last entry wins", append(append(requestHeaders(nil), attrEntry("f", field("a", stringValue("1")))...),
			attrEntry("f", field("b", stringValue("2")))...), true},
		{"a field's key repeated: the last entry wins", attrEntry("f", append(field("a", stringValue("1")), field("a", stringValue("2"))...)), true},
		{"an attributes entry without a key", wireBytes(nil, fieldReqAttributes, wireBytes(nil, fieldMapValue, field("a", nil))), true},
		{"an attributes entry without a value", wireBytes(nil, fieldReqAttributes, wireBytes(nil, fieldMapKey, []byte("f"))), true},
		{"an empty attributes entry", wireBytes(nil, fieldReqAttributes, nil), true},
		{"a field without a value", attrEntry("f", wireBytes(nil, fieldStructFields, wireBytes(nil, fieldMapKey, []byte("a")))), true},
		{"a NaN with a payload, and -NaN", attrEntry("f", append(
			field("a", protowire.AppendFixed64(protowire.AppendTag(nil, fieldValueNumber, protowire.Fixed64Type), 0x7ff0000000000001)),
			field("b", protowire.AppendFixed64(protowire.AppendTag(nil, fieldValueNumber, protowire.Fixed64Type), 0xfff8000000000000))...)), true},
		{"an empty struct", attrEntry("f", nil), true},
		{"a null value past 32 bits", attrEntry("f", field("a", wireVarint(nil, fieldValueNull, 1<<40+3))), true},
		{"a bool value of 2", attrEntry("f", field("a", wireVarint(nil, fieldValueBool, 2))), true},

		// Left to protobuf-go, which decodes them as the fields they are,
		// merges what it merges, keeps what it does not know, or fails.
		{"attributes", append(requestHeaders(headerMap(kv(":status", "200"))), structAttrs...), true},
		{"observability mode and attributes, then metadata", append(append(wireVarint(nil, fieldReqObservability, 1), structAttrs...),
			wireBytes(nil, 8, nil)...), false},
		{"an attribute that is a struct", mustMarshal(t, &extprocv3.ProcessingRequest{Attributes: map[string]*structpb.Struct{
			"f": {Fields: map[string]*structpb.Value{"s": structpb.NewStructValue(&structpb.Struct{})}}}}), false},
		{"an attribute that is a list", mustMarshal(t, &extprocv3.ProcessingRequest{Attributes: map[string]*structpb.Struct{
			"f": {Fields: map[string]*structpb.Value{"l": structpb.NewListValue(&structpb.ListValue{})}}}}), false},
		{"a value of two kinds: protobuf replaces", attrEntry("f", field("a", append(stringValue("1"), wireVarint(nil, fieldValueBool, 1)...))), false},
		{"a number, then a string", attrEntry("f", field("a", append(protowire.AppendFixed64(protowire.AppendTag(nil, fieldValueNumber, protowire.Fixed64Type), 1), stringValue("x")...))), false},
		{"a bool, then null", attrEntry("f", field("a", append(wireVarint(nil, fieldValueBool, 1), wireVarint(nil, fieldValueNull, 0)...))), false},
		{"a value's kind repeated", attrEntry("f", field("a", append(stringValue("1"), stringValue("2")...))), false},
		{"an attributes entry's key repeated", wireBytes(nil, fieldReqAttributes, wireBytes(wireBytes(nil, fieldMapKey, []byte("a")), fieldMapKey, []byte("b"))), false},
		{"an attributes entry's value repeated: protobuf merges", wireBytes(nil, fieldReqAttributes, wireBytes(wireBytes(nil, fieldMapValue, field("a", nil)), fieldMapValue, field("b", nil))), false},
		{"an unknown field in an attributes entry", wireBytes(nil, fieldReqAttributes, wireVarint(wireBytes(nil, fieldMapKey, []byte("a")), 3, 1)), false},
		{"an unknown field in a struct", attrEntry("f", wireVarint(nil, 2, 1)), false},
		{"an attribute's key not UTF-8", wireBytes(nil, fieldReqAttributes, wireBytes(nil, fieldMapKey, []byte{0xff})), false},
		{"a field's key not UTF-8", attrEntry("f", wireBytes(nil, fieldStructFields, wireBytes(nil, fieldMapKey, []byte{0xc3}))), false},
		{"a string value not UTF-8", attrEntry("f", field("a", wireBytes(nil, fieldValueString, []byte{0xff}))), false},
		{"a number as a varint", attrEntry("f", field("a", wireVarint(nil, fieldValueNumber, 1))), false},
		{"a number cut short", attrEntry("f", field("a", protowire.AppendTag(nil, fieldValueNumber, protowire.Fixed64Type))), false},
		{"attributes as a varint", wireVarint(nil, fieldReqAttributes, 1), false},
		{"metadata context", mustMarshal(t, &extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{
			FilterMetadata: map[string]*structpb.Struct{"f": {}}}}), false},
		{"an unknown field", append(requestHeaders(nil), wireVarint(nil, 99, 1)...), false},
		{"an unknown field in a header", requestHeaders(headerMap(append(kv("a", "b"), wireVarint(nil, 9, 1)...))), false},
		{"an unknown field in a body", wireBytes(nil, fieldReqRequestBody, wireVarint(nil, 9, 1)), false},
		{"headers twice: protobuf merges", append(requestHeaders(headerMap(kv("a", "1"))), requestHeaders(headerMap(kv("b", "2")))...), false},
		{"headers, then a body: protobuf replaces", append(requestHeaders(headerMap(kv("a", "1"))), wireBytes(nil, fieldReqRequestBody, nil)...), false},
		{"a header map twice: protobuf merges", wireBytes(nil, fieldReqRequestHeaders, wireBytes(wireBytes(nil, fieldHTTPHeadersMap, headerMap(kv("a", "1"))), fieldHTTPHeadersMap, headerMap(kv("b", "2")))), false},
		{"trailers twice: protobuf merges", wireBytes(nil, fieldReqRequestTrailers, wireBytes(wireBytes(nil, fieldHTTPTrailersMap, headerMap(kv("a", "1"))), fieldHTTPTrailersMap, headerMap(kv("b", "2")))), false},
		{"protocol config twice: protobuf merges", wireBytes(wireBytes(nil, fieldReqProtocolConfig, wireVarint(nil, fieldConfigRequestMode, 1)), fieldReqProtocolConfig, wireVarint(nil, fieldConfigResponseMode, 2)), false},
		{"end of stream as bytes: protobuf keeps it unknown", requestHeaders(nil, wireBytes(nil, fieldHTTPHeadersEOS, []byte{1})), false},
		{"a body as a varint", wireBytes(nil, fieldReqRequestBody, wireVarint(nil, fieldHTTPBodyBody, 1)), false},
		{"a key as a varint", requestHeaders(headerMap(wireVarint(nil, fieldHeaderKey, 1))), false},
		{"headers as a varint", wireVarint(nil, fieldReqRequestHeaders, 1), false},
		{"a group", protowire.AppendTag(nil, fieldReqRequestHeaders, protowire.StartGroupType), false},
		{"field number zero", wireVarint(nil, 0, 1), false},
		{"an invalid key", requestHeaders(headerMap(kv("\xff", "v"))), false},
		{"an invalid string value", requestHeaders(headerMap(wireHeaderValue(wireBytes(nil, fieldHeaderKey, []byte("k")), wireBytes(nil, fieldHeaderValue, []byte("\xc3"))))), false},
		{"a length past the end", []byte{byte(fieldReqRequestBody)<<3 | byte(protowire.BytesType), 10, 1}, false},
		{"a varint that never ends", append([]byte{byte(fieldReqObservability) << 3}, bytes.Repeat([]byte{0xff}, 11)...), false},
	}
	for _, tenant := range []string{"t1"} {
		for i, b := range lifecycleMessages(t, tenant) {
			cases = append(cases, struct {
				name string
				b    []byte
				fast bool
			}{fmt.Sprintf("lifecycle message %d", i), b, true})
		}
	}
	return cases
}

func TestDecodeRequest(t *testing.T) {
	for _, tc := range requestWireCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			if err := sameDecode(tc.b, nil); err != nil {
				t.Fatal(err)
			}
			// grpc-go frees the message's buffer once it is decoded:
			// what is decoded must not point into it.
			b := bytes.Clone(tc.b)
			var m extprocv3.ProcessingRequest
			if got := decodeRequestFast(b, &m); got != tc.fast {
				t.Errorf("decoded by hand: got %v, want %v", got, tc.fast)
			}
			if !tc.fast && proto.Size(&m) != 0 {
				t.Errorf("left to protobuf-go, but the message holds %s", prototext.Format(&m))
			}
			want := &extprocv3.ProcessingRequest{}
			if tc.fast && proto.Unmarshal(tc.b, want) == nil {
				for i := range b {
					b[i] = 'X'
				}
				if !proto.Equal(&m, want) {
					t.Errorf("after the buffer was overwritten, got\n%s\nwant\n%s", prototext.Format(&m), prototext.Format(want))
				}
			}
		})
	}
}

// TestDecodeRequestCut: every message of the cases, cut short at every
// byte, decodes as protobuf-go decodes it, or fails as it fails.
func TestDecodeRequestCut(t *testing.T) {
	for _, tc := range requestWireCases(t) {
		for n := range len(tc.b) {
			if err := sameDecode(tc.b[:n], nil); err != nil {
				t.Fatalf("%s, cut to %d of %d bytes: %v", tc.name, n, len(tc.b), err)
			}
		}
	}
}

// TestDecodeRequestNotFresh: a message that already holds something is
// reset and decoded by proto.Unmarshal, which the hand decoder, writing
// only the fields it decodes, would not do.
func TestDecodeRequestNotFresh(t *testing.T) {
	b := mustMarshal(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte("x")}}})
	for _, tc := range []struct {
		name  string
		start func(*extprocv3.ProcessingRequest)
	}{
		{"protocol config", func(m *extprocv3.ProcessingRequest) {
			m.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_BUFFERED}
		}},
		{"observability mode", func(m *extprocv3.ProcessingRequest) { m.ObservabilityMode = true }},
		{"a typed nil request", func(m *extprocv3.ProcessingRequest) { m.Request = (*extprocv3.ProcessingRequest_ResponseBody)(nil) }},
		{"a request", func(m *extprocv3.ProcessingRequest) {
			m.Request = &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte("y")}}
		}},
		{"attributes", func(m *extprocv3.ProcessingRequest) { m.Attributes = map[string]*structpb.Struct{"k": {}} }},
		{"metadata context", func(m *extprocv3.ProcessingRequest) { m.MetadataContext = &corev3.Metadata{} }},
		{"flow control", func(m *extprocv3.ProcessingRequest) {
			m.FlowControlInit = &extprocv3.ProcessingRequest_FlowControlInit{}
		}},
		{"window update", func(m *extprocv3.ProcessingRequest) {
			m.ClientWindowUpdate = &extprocv3.ProcessingRequest_ClientWindowUpdate{}
		}},
		{"unknown fields", func(m *extprocv3.ProcessingRequest) { m.ProtoReflect().SetUnknown(wireVarint(nil, 99, 1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range [][]byte{b, wireVarint(nil, fieldReqObservability, 1)} {
				if err := sameDecode(b, tc.start); err != nil {
					t.Fatalf("%x: %v", b, err)
				}
			}
			got := &extprocv3.ProcessingRequest{}
			tc.start(got)
			if err := decodeRequest(b, got); err != nil {
				t.Fatal(err)
			}
			if got.Request == nil || got.GetRequestBody() == nil {
				t.Errorf("got request %#v, want the body decoded", got.Request)
			}
		})
	}
}

// TestRejectedHeaderMapAllocates: a header map the hand decoder leaves
// to protobuf-go costs it nothing first, however many headers follow
// the one it cannot take. (Checked only as the headers are decoded, a
// bad first header and a million empty ones cost 109 MB before
// protobuf-go's error; protobuf-go alone, 344 B.)
func TestRejectedHeaderMapAllocates(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  []byte
	}{
		{"invalid UTF-8 in a key", wireBytes(nil, fieldHeaderKey, []byte{0xff})},
		{"invalid UTF-8 in a value", wireBytes(nil, fieldHeaderValue, []byte{0xff})},
		{"an unknown field", wireVarint(nil, 9, 1)},
		{"a key as a varint", wireVarint(nil, fieldHeaderKey, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hm := append(wireBytes(nil, fieldHeaderMapHeaders, tc.bad), bytes.Repeat(wireBytes(nil, fieldHeaderMapHeaders, nil), 100_000)...)
			b := wireBytes(nil, fieldReqRequestHeaders, wireBytes(nil, fieldHTTPHeadersMap, hm))
			var m extprocv3.ProcessingRequest
			if decodeRequestFast(b, &m) {
				t.Fatal("decoded by hand: want it left to protobuf-go")
			}
			if got := bytesPerRun(3, func() { decodeRequestFast(b, &m) }); got > 1024 {
				t.Errorf("got %.0f bytes allocated before leaving it to protobuf-go, want at most 1 KiB", got)
			}
		})
	}
}

// TestRejectedBodyAllocates: a body message the hand decoder leaves to
// protobuf-go costs it no copy of the body first. Envoy's body messages
// carry metadata_context after the body whenever the filter forwards a
// namespace (the shipped configs forward jwt_authn's), and a copy made
// before the hand decoder gave up doubled what a large body cost at its
// arrival.
func TestRejectedBodyAllocates(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 1<<20)
	md := mustMarshal(t, &extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{
		FilterMetadata: map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": {}}}})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"request body, then metadata context", append(wireBytes(nil, fieldReqRequestBody, wireBytes(nil, fieldHTTPBodyBody, body)), md...)},
		{"response body, then metadata context", append(wireBytes(nil, fieldReqResponseBody, wireBytes(nil, fieldHTTPBodyBody, body)), md...)},
		{"an unknown field after the body", wireBytes(nil, fieldReqRequestBody, wireVarint(wireBytes(nil, fieldHTTPBodyBody, body), 9, 1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m extprocv3.ProcessingRequest
			if decodeRequestFast(tc.b, &m) {
				t.Fatal("decoded by hand: want it left to protobuf-go")
			}
			if got := bytesPerRun(3, func() { decodeRequestFast(tc.b, &m) }); got > 1024 {
				t.Errorf("got %.0f bytes allocated before leaving it to protobuf-go, want at most 1 KiB", got)
			}
			// And the decode as a whole copies the body once.
			if got := bytesPerRun(3, func() { _ = decodeRequest(tc.b, &extprocv3.ProcessingRequest{}) }); got > 1.5*float64(len(body)) {
				t.Errorf("decoding the message allocated %.0f bytes, want one copy of the %d-byte body and little more", got, len(body))
			}
		})
	}
}

// TestDecodedKeys: the keys of a header map share one array; each is
// still its own after the map is decoded, and the values are not in it.
func TestDecodedKeys(t *testing.T) {
	want := &corev3.HeaderMap{}
	for i := range 50 {
		want.Headers = append(want.Headers, &corev3.HeaderValue{Key: fmt.Sprintf("key-%d", i), RawValue: []byte(fmt.Sprintf("value-%d", i))})
	}
	got := &corev3.HeaderMap{}
	if !decodeHeaderMap(mustMarshal(t, want), got) {
		t.Fatal("not decoded by hand")
	}
	if !proto.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", prototext.Format(got), prototext.Format(want))
	}
	// Appending to a value must not write over another value or a key.
	for _, h := range got.Headers {
		_ = append(h.RawValue, "overwritten"...)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("after appending to the values, got\n%s\nwant\n%s", prototext.Format(got), prototext.Format(want))
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, tc := range requestWireCases(f) {
		f.Add(tc.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := sameDecode(b, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConsumeInline: consumeTag, consumeBytes and nextBytes answer as
// protowire's functions do for every first two bytes, followed by
// nothing, by a byte, or by a long enough field.
func TestConsumeInline(t *testing.T) {
	tail := bytes.Repeat([]byte{0x01}, 300)
	for b0 := range 256 {
		for b1 := range 257 {
			in := []byte{byte(b0)}
			if b1 < 256 {
				in = append(in, byte(b1))
			}
			for _, b := range [][]byte{in, append(bytes.Clone(in), 0x01), append(bytes.Clone(in), tail...)} {
				gn, gt, gl := consumeTag(b)
				wn, wt, wl := protowire.ConsumeTag(b)
				if gl != wl || (wl >= 0 && (gn != wn || gt != wt)) {
					t.Fatalf("consumeTag(%x): got %d, %d, %d, want %d, %d, %d", b, gn, gt, gl, wn, wt, wl)
				}
				gv, gl := consumeBytes(b)
				wv, wl := protowire.ConsumeBytes(b)
				if gl != wl || !bytes.Equal(gv, wv) {
					t.Fatalf("consumeBytes(%x): got %x, %d, want %x, %d", b, gv, gl, wv, wl)
				}
				gn, gv, gr := nextBytes(b)
				wn, wv, wr := nextBytesSlow(b)
				if gn != wn || !bytes.Equal(gv, wv) || !bytes.Equal(gr, wr) || len(gr) != len(wr) {
					t.Fatalf("nextBytes(%x): got %d, %x, %x, want %d, %x, %x", b, gn, gv, gr, wn, wv, wr)
				}
			}
		}
	}
}

// BenchmarkDecodeRequest decodes a lifecycle's ten messages, and the
// response headers with the attributes the shipped config asks for, by
// hand and with protobuf-go.
func BenchmarkDecodeRequest(b *testing.B) {
	lifecycle := lifecycleMessages(b, "t1")
	rh := &extprocv3.ProcessingRequest{}
	if err := proto.Unmarshal(lifecycle[2], rh); err != nil {
		b.Fatal(err)
	}
	rh.Attributes = map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{
		"response.code_details": structpb.NewStringValue("via_upstream")}}}
	for _, in := range []struct {
		name string
		msgs [][]byte
	}{
		{"lifecycle", lifecycle},
		{"attributes", [][]byte{mustMarshal(b, rh)}},
	} {
		for _, tc := range []struct {
			name   string
			decode func([]byte, *extprocv3.ProcessingRequest) error
		}{
			{"hand", decodeRequest},
			{"protobuf", func(b []byte, m *extprocv3.ProcessingRequest) error { return proto.Unmarshal(b, m) }},
		} {
			b.Run(in.name+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					for _, msg := range in.msgs {
						if err := tc.decode(msg, &extprocv3.ProcessingRequest{}); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
