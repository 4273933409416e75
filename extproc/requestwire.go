package extproc

import (
	"unicode/utf8"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Envoy's messages are decoded here, by hand, rather than by
// protobuf-go's table-driven decoder. That decoder sets a oneof through
// reflection, allocates every header as three objects (the message, its
// key, its value), grows the header slice as it goes, and allocates each
// message nested in another on its own; for the ten messages of a
// streamed chat completion it ran more instructions than anything
// tokenwarden itself does, and spread them over more code than the
// instruction cache holds between one message and the next.
//
// The hand decoder covers what Envoy sends on every stream: headers,
// bodies and trailers, end_of_stream, observability_mode,
// protocol_config and scalar attributes (attributeswire.go), each field
// at most once where protobuf would merge. A message with anything
// else — metadata_context, an attribute that is a Struct or a list, a
// field it does not know, a field repeated that protobuf would merge, a
// wire type other than the field's, invalid UTF-8 in a string, any
// malformed byte — is decoded by protobuf-go from the start. So the result is
// always the message protobuf-go would decode, or its error;
// FuzzDecodeRequest and TestDecodeRequestCut hold the two to that.

// decodeRequest decodes b into m, as proto.Unmarshal does.
func decodeRequest(b []byte, m *extprocv3.ProcessingRequest) error {
	if fresh(m) && decodeRequestFast(b, m) {
		return nil
	}
	return proto.Unmarshal(b, m)
}

// fresh reports whether m is a new message, as grpc-go's generated Recv
// passes: the hand decoder writes only the fields it decodes, where
// proto.Unmarshal resets the message first. (TestRequestFieldsKnown
// fails when go-control-plane adds a field this does not look at.)
func fresh(m *extprocv3.ProcessingRequest) bool {
	return m.Request == nil && m.MetadataContext == nil && m.Attributes == nil && !m.ObservabilityMode &&
		m.ProtocolConfig == nil && m.FlowControlInit == nil && m.ClientWindowUpdate == nil &&
		len(m.ProtoReflect().GetUnknown()) == 0
}

// decodeRequestFast decodes b into the empty m and reports whether it
// could; when it could not, m is empty again.
func decodeRequestFast(b []byte, m *extprocv3.ProcessingRequest) bool {
	if decodeProcessingRequest(b, m) {
		ownBody(m)
		return true
	}
	m.Request, m.ObservabilityMode, m.ProtocolConfig, m.Attributes = nil, false, nil, nil
	return false
}

// Field numbers of the messages decoded here (TestRequestFieldNumbers
// holds them to the messages' descriptors).
const (
	fieldReqRequestHeaders   protowire.Number = 2  // ProcessingRequest.request_headers
	fieldReqResponseHeaders  protowire.Number = 3  // ProcessingRequest.response_headers
	fieldReqRequestBody      protowire.Number = 4  // ProcessingRequest.request_body
	fieldReqResponseBody     protowire.Number = 5  // ProcessingRequest.response_body
	fieldReqRequestTrailers  protowire.Number = 6  // ProcessingRequest.request_trailers
	fieldReqResponseTrailers protowire.Number = 7  // ProcessingRequest.response_trailers
	fieldReqObservability    protowire.Number = 10 // ProcessingRequest.observability_mode
	fieldReqProtocolConfig   protowire.Number = 11 // ProcessingRequest.protocol_config

	fieldHTTPHeadersMap protowire.Number = 1 // HttpHeaders.headers
	fieldHTTPHeadersEOS protowire.Number = 3 // HttpHeaders.end_of_stream

	fieldHTTPBodyBody        protowire.Number = 1 // HttpBody.body
	fieldHTTPBodyEOS         protowire.Number = 2 // HttpBody.end_of_stream
	fieldHTTPBodyEOSNoMsg    protowire.Number = 3 // HttpBody.end_of_stream_without_message
	fieldHTTPBodyCompressed  protowire.Number = 4 // HttpBody.grpc_message_compressed
	fieldHTTPBodyDrainDone   protowire.Number = 5 // HttpBody.drain_complete
	fieldHTTPTrailersMap     protowire.Number = 1 // HttpTrailers.trailers
	fieldHeaderMapHeaders    protowire.Number = 1 // HeaderMap.headers
	fieldHeaderValue         protowire.Number = 2 // HeaderValue.value (key and raw_value: replywire.go)
	fieldConfigRequestMode   protowire.Number = 1 // ProtocolConfiguration.request_body_mode
	fieldConfigResponseMode  protowire.Number = 2 // ProtocolConfiguration.response_body_mode
	fieldConfigSendNoWaiting protowire.Number = 3 // ProtocolConfiguration.send_body_without_waiting_for_header_response
)

func decodeProcessingRequest(b []byte, m *extprocv3.ProcessingRequest) bool {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 || num != fieldReqObservability {
				return false
			}
			b = b[n:]
			m.ObservabilityMode = v != 0
			continue
		}
		if typ != protowire.BytesType {
			return false
		}
		v, n := consumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == fieldReqProtocolConfig {
			if m.ProtocolConfig != nil {
				return false // protobuf would merge the two
			}
			var ok bool
			if m.ProtocolConfig, ok = decodeProtocolConfig(v); !ok {
				return false
			}
			continue
		}
		if num == fieldReqAttributes {
			if m.Attributes == nil {
				m.Attributes = map[string]*structpb.Struct{}
			}
			if !decodeAttributesEntry(v, m.Attributes) {
				return false
			}
			continue
		}
		if m.Request != nil {
			return false // protobuf would merge the two, or replace one
		}
		// Each oneof member is allocated in one piece with the message it
		// wraps (and a header map with its headers'): they live and die
		// together.
		var ok bool
		switch num {
		case fieldReqRequestHeaders:
			a := new(withHeaders[extprocv3.ProcessingRequest_RequestHeaders])
			a.w.RequestHeaders, ok = &a.h, decodeHTTPHeaders(v, &a.h, &a.m)
			m.Request = &a.w
		case fieldReqResponseHeaders:
			a := new(withHeaders[extprocv3.ProcessingRequest_ResponseHeaders])
			a.w.ResponseHeaders, ok = &a.h, decodeHTTPHeaders(v, &a.h, &a.m)
			m.Request = &a.w
		case fieldReqRequestBody:
			a := new(withBody[extprocv3.ProcessingRequest_RequestBody])
			a.w.RequestBody, ok = &a.b, decodeHTTPBody(v, &a.b)
			m.Request = &a.w
		case fieldReqResponseBody:
			a := new(withBody[extprocv3.ProcessingRequest_ResponseBody])
			a.w.ResponseBody, ok = &a.b, decodeHTTPBody(v, &a.b)
			m.Request = &a.w
		case fieldReqRequestTrailers:
			a := new(withTrailers[extprocv3.ProcessingRequest_RequestTrailers])
			a.w.RequestTrailers, ok = &a.t, decodeHTTPTrailers(v, &a.t, &a.m)
			m.Request = &a.w
		case fieldReqResponseTrailers:
			a := new(withTrailers[extprocv3.ProcessingRequest_ResponseTrailers])
			a.w.ResponseTrailers, ok = &a.t, decodeHTTPTrailers(v, &a.t, &a.m)
			m.Request = &a.w
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// withHeaders, withBody and withTrailers are a oneof member of a
// ProcessingRequest allocated with what it wraps.
type withHeaders[W any] struct {
	w W
	h extprocv3.HttpHeaders
	m corev3.HeaderMap
}

type withBody[W any] struct {
	w W
	b extprocv3.HttpBody
}

type withTrailers[W any] struct {
	w W
	t extprocv3.HttpTrailers
	m corev3.HeaderMap
}

// decodeHTTPHeaders decodes an HttpHeaders into h, its header map into
// hm; false means protobuf-go decodes the message.
func decodeHTTPHeaders(b []byte, h *extprocv3.HttpHeaders, hm *corev3.HeaderMap) bool {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == fieldHTTPHeadersMap && typ == protowire.BytesType && h.Headers == nil:
			v, n := consumeBytes(b)
			if n < 0 || !decodeHeaderMap(v, hm) {
				return false
			}
			b = b[n:]
			h.Headers = hm
		case num == fieldHTTPHeadersEOS && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			h.EndOfStream = v != 0
		default:
			return false
		}
	}
	return true
}

// decodeHTTPTrailers decodes an HttpTrailers into t, its header map into
// hm; false means protobuf-go decodes the message.
func decodeHTTPTrailers(b []byte, t *extprocv3.HttpTrailers, hm *corev3.HeaderMap) bool {
	for len(b) > 0 {
		var num protowire.Number
		var v []byte
		if num, v, b = nextBytes(b); num != fieldHTTPTrailersMap || t.Trailers != nil || !decodeHeaderMap(v, hm) {
			return false
		}
		t.Trailers = hm
	}
	return true
}

// decodeHTTPBody decodes an HttpBody into body; false means protobuf-go
// decodes the message.
func decodeHTTPBody(b []byte, body *extprocv3.HttpBody) bool {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == fieldHTTPBodyBody && typ == protowire.BytesType {
			v, n := consumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			// The last occurrence wins, as in protobuf-go. A view of b
			// until the whole message is decoded (see ownBody).
			body.Body = v
			continue
		}
		if typ != protowire.VarintType {
			return false
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch num {
		case fieldHTTPBodyEOS:
			body.EndOfStream = v != 0
		case fieldHTTPBodyEOSNoMsg:
			body.EndOfStreamWithoutMessage = v != 0
		case fieldHTTPBodyCompressed:
			body.GrpcMessageCompressed = v != 0
		case fieldHTTPBodyDrainDone:
			body.DrainComplete = v != 0
		default:
			return false
		}
	}
	return true
}

// clone copies b as protobuf-go copies a proto3 bytes field: nil when
// empty. (make and copy, which the compiler turns into one allocation
// that it does not clear first, rather than append's growslice.)
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// ownBody replaces the body a decoded message views in the buffer it
// was decoded from by a copy, as protobuf-go's (nil for an empty body).
// A body is copied only once the whole message has decoded: one the hand
// decoder gives up on (Envoy's body messages carry metadata_context
// whenever the filter forwards a namespace) is decoded again by
// protobuf-go, and an earlier copy would double the bytes a large body
// costs at its arrival.
func ownBody(m *extprocv3.ProcessingRequest) {
	switch r := m.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestBody:
		r.RequestBody.Body = clone(r.RequestBody.Body)
	case *extprocv3.ProcessingRequest_ResponseBody:
		r.ResponseBody.Body = clone(r.ResponseBody.Body)
	}
}

// consumeTag and consumeBytes are protowire.ConsumeTag and ConsumeBytes,
// inline for the one-byte tags and lengths of nearly every field here.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	if len(b) > 0 && b[0] < 0x80 && b[0] >= 1<<3 {
		return protowire.Number(b[0] >> 3), protowire.Type(b[0] & 7), 1
	}
	return protowire.ConsumeTag(b)
}

func consumeBytes(b []byte) ([]byte, int) {
	if len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
		return b[1 : 1+b[0]], 1 + int(b[0])
	}
	return protowire.ConsumeBytes(b)
}

// decodeProtocolConfig decodes a ProtocolConfiguration.
func decodeProtocolConfig(b []byte) (*extprocv3.ProtocolConfiguration, bool) {
	c := &extprocv3.ProtocolConfiguration{}
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 || typ != protowire.VarintType {
			return nil, false
		}
		b = b[n:]
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch num {
		case fieldConfigRequestMode:
			// An enum is an int32 on the wire; protobuf-go truncates.
			c.RequestBodyMode = filterv3.ProcessingMode_BodySendMode(int32(v))
		case fieldConfigResponseMode:
			c.ResponseBodyMode = filterv3.ProcessingMode_BodySendMode(int32(v))
		case fieldConfigSendNoWaiting:
			c.SendBodyWithoutWaitingForHeaderResponse = v != 0
		default:
			return nil, false
		}
	}
	return c, true
}

// decodeHeaderMap decodes a HeaderMap into m, its headers in one array,
// the pointers to them in another and their keys in a third, however
// many there are. A first pass checks
// every header as protobuf-go would and counts them and their keys'
// bytes: so nothing is allocated for a map that is left to protobuf-go,
// and each array is allocated once, at its size. The keys point into
// theirs: bytes appended after a key never change it, and nothing keeps
// a key beyond the message. Each value is a copy of its own, as
// protobuf-go makes it: a stream keeps some of them (its path, its
// identity) to its end, and they must not hold every other header with
// them. false means protobuf-go decodes the message.
func decodeHeaderMap(b []byte, m *corev3.HeaderMap) bool {
	count, keyBytes := 0, 0
	for rest := b; len(rest) > 0; count++ {
		var num protowire.Number
		var v []byte
		if num, v, rest = nextBytes(rest); num != fieldHeaderMapHeaders {
			return false
		}
		k, ok := checkHeaderValue(v)
		if !ok {
			return false
		}
		keyBytes += k
	}
	if count == 0 {
		return true
	}
	values := make([]corev3.HeaderValue, count)
	m.Headers = make([]*corev3.HeaderValue, count)
	keys := make([]byte, 0, keyBytes)
	for i := range values {
		var v []byte
		_, v, b = nextBytes(b)
		keys = decodeHeaderValue(v, &values[i], keys)
		m.Headers[i] = &values[i]
	}
	return true
}

// checkHeaderValue reports whether decodeHeaderValue decodes an encoded
// HeaderValue as protobuf-go would, and the bytes of its keys (one,
// unless the encoding repeats it). Its strings must be UTF-8, as
// protobuf-go requires of a proto3 string.
func checkHeaderValue(b []byte) (keyBytes int, ok bool) {
	if key, _, ok := keyAndRawValue(b); ok {
		return len(key), utf8.Valid(key)
	}
	for len(b) > 0 {
		var num protowire.Number
		var v []byte
		num, v, b = nextBytes(b)
		switch num {
		case fieldHeaderKey:
			keyBytes += len(v)
			fallthrough
		case fieldHeaderValue:
			if !utf8.Valid(v) {
				return 0, false
			}
		case fieldHeaderRawValue:
		default:
			return 0, false
		}
	}
	return keyBytes, true
}

// decodeHeaderValue decodes a HeaderValue that checkHeaderValue passed
// into h, its key appended to keys, and returns keys. As protobuf-go
// does, it leaves an empty raw value nil, and the last occurrence of a
// field wins.
func decodeHeaderValue(b []byte, h *corev3.HeaderValue, keys []byte) []byte {
	if key, raw, ok := keyAndRawValue(b); ok {
		if len(key) > 0 {
			start := len(keys)
			keys = append(keys, key...)
			h.Key = unsafe.String(&keys[start], len(key))
		}
		h.RawValue = clone(raw)
		return keys
	}
	for len(b) > 0 {
		var num protowire.Number
		var v []byte
		num, v, b = nextBytes(b)
		switch num {
		case fieldHeaderKey:
			h.Key = ""
			if len(v) > 0 {
				start := len(keys)
				keys = append(keys, v...)
				h.Key = unsafe.String(&keys[start], len(v))
			}
		case fieldHeaderValue:
			h.Value = string(v)
		case fieldHeaderRawValue:
			h.RawValue = clone(v)
		}
	}
	return keys
}

// keyAndRawValue splits an encoded HeaderValue of the shape Envoy sends
// nearly every header in: its key, then its raw value, each shorter than
// 128 bytes. ok is false for any other shape, which is read field by
// field. (The tags are replywire.go's.)
func keyAndRawValue(b []byte) (key, raw []byte, ok bool) {
	if len(b) < 4 || b[0] != tagHeaderKey || b[1] >= 0x80 {
		return
	}
	k := 2 + int(b[1])
	if k+2 > len(b) || b[k] != tagHeaderRawValue || b[k+1] >= 0x80 || int(b[k+1]) != len(b)-k-2 {
		return
	}
	return b[2:k], b[k+2:], true
}

// nextBytes reads the length-delimited field b starts with: its number,
// its value and the rest of b. The number is -1 when b does not start
// with a length-delimited field whole. A one-byte tag and length, which
// a header's fields nearly always have, are read inline.
func nextBytes(b []byte) (num protowire.Number, v, rest []byte) {
	if len(b) >= 2 && b[0] < 0x80 && b[0]&7 == byte(protowire.BytesType) && b[0] >= 1<<3 && b[1] < 0x80 && int(b[1]) <= len(b)-2 {
		return protowire.Number(b[0] >> 3), b[2 : 2+b[1]], b[2+b[1]:]
	}
	return nextBytesSlow(b)
}

func nextBytesSlow(b []byte) (protowire.Number, []byte, []byte) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || typ != protowire.BytesType {
		return -1, nil, nil
	}
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		return -1, nil, nil
	}
	return num, v, b[n+m:]
}
