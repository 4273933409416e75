package extproc

import (
	"slices"
	"strings"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The reply to a reserved request's response headers is the largest
// message tokenwarden builds per request: a header mutation with three
// x-ratelimit-* headers per dimension that applied and the provider's
// own rate-limit headers to remove. Built as protobuf-go messages it was
// two dozen of them (each header an option wrapping a value), 3 KB in
// one allocation, and protobuf-go's encoder walked them all twice, once
// to size and once to write: more than the rest of the request's replies
// together. It is written here in its wire form instead, the bytes
// protobuf-go would write for those messages (TestResponseHeadersWire
// and FuzzResponseHeadersWire hold it to that), and handed to the codec
// as the unknown fields of an otherwise empty ProcessingResponse, which
// protobuf-go encodes verbatim: a receiver decodes them as the fields
// they are. That is how dynamicMetadata writes its fields, too.

// appendVarint appends v as protowire.AppendVarint does, inline for the
// one-byte values that every tag and most lengths written here are.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// appendTag appends a field's tag, as protowire.AppendTag does.
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	if num < 16 {
		return append(b, byte(num)<<3|byte(typ&7))
	}
	return protowire.AppendTag(b, num, typ)
}

// appendString and appendBytes append a length-delimited value, as
// protowire.AppendString and AppendBytes do.
func appendString(b []byte, s string) []byte {
	return append(appendVarint(b, uint64(len(s))), s...)
}

func appendBytes(b []byte, v []byte) []byte {
	return append(appendVarint(b, uint64(len(v))), v...)
}

// wireHeader is a header to set, in a reply written in wire form.
type wireHeader struct {
	key   string
	value []byte
}

// Field numbers of the messages the replies written here nest
// (TestWireFieldNumbers holds them to the messages' descriptors).
const (
	fieldResponseHeaders protowire.Number = 2 // ProcessingResponse.response_headers
	fieldRequestBody     protowire.Number = 3 // ProcessingResponse.request_body
	fieldResponseBody    protowire.Number = 4 // ProcessingResponse.response_body
	fieldDynamicMetadata protowire.Number = 8 // ProcessingResponse.dynamic_metadata
	fieldHeadersResponse protowire.Number = 1 // HeadersResponse.response
	fieldBodyResponse    protowire.Number = 1 // BodyResponse.response
	fieldHeaderMutation  protowire.Number = 2 // CommonResponse.header_mutation
	fieldBodyMutation    protowire.Number = 3 // CommonResponse.body_mutation
	fieldClearRouteCache protowire.Number = 5 // CommonResponse.clear_route_cache
	fieldMutationBody    protowire.Number = 1 // BodyMutation.body
	fieldSetHeaders      protowire.Number = 1 // HeaderMutation.set_headers
	fieldRemoveHeaders   protowire.Number = 2 // HeaderMutation.remove_headers
	fieldOptionHeader    protowire.Number = 1 // HeaderValueOption.header
	fieldHeaderKey       protowire.Number = 1 // HeaderValue.key
	fieldHeaderRawValue  protowire.Number = 3 // HeaderValue.raw_value
)

// The one-byte tags of the fields written for every header (field
// numbers below 16 make one-byte tags).
const (
	tagSetHeaders     = byte(fieldSetHeaders<<3) | byte(protowire.BytesType)
	tagRemoveHeaders  = byte(fieldRemoveHeaders<<3) | byte(protowire.BytesType)
	tagOptionHeader   = byte(fieldOptionHeader<<3) | byte(protowire.BytesType)
	tagHeaderKey      = byte(fieldHeaderKey<<3) | byte(protowire.BytesType)
	tagHeaderRawValue = byte(fieldHeaderRawValue<<3) | byte(protowire.BytesType)
)

// validKey returns key as a protobuf string must be: UTF-8, invalid
// bytes as U+FFFD. The header names written come from tokenwarden or
// from a received message, which protobuf-go has checked already.
func validKey(key string) string {
	if utf8.ValidString(key) {
		return key
	}
	return strings.ToValidUTF8(key, "\uFFFD")
}

// headerValueSize is the size of a HeaderValue{key, raw_value}; proto3
// leaves empty fields out.
func headerValueSize(h *wireHeader) int {
	n := 0
	if h.key != "" {
		n += protowire.SizeTag(fieldHeaderKey) + protowire.SizeBytes(len(h.key))
	}
	if len(h.value) > 0 {
		n += protowire.SizeTag(fieldHeaderRawValue) + protowire.SizeBytes(len(h.value))
	}
	return n
}

// headerOptionSize is the size of a HeaderValueOption{header}.
func headerOptionSize(h *wireHeader) int {
	return protowire.SizeTag(fieldOptionHeader) + protowire.SizeBytes(headerValueSize(h))
}

// headerMutation is a HeaderMutation to write in wire form: set, then
// extra (headers built as messages: the IETF, Anthropic and downgrade
// headers, which options turn on), then the names in remove. The keys
// and names must be UTF-8 (see validKey). Of an extra header only its
// key and raw value are written: each must be what setHeader builds
// (TestExtraHeadersAreKeyAndValue).
type headerMutation struct {
	set    []wireHeader
	extra  []*corev3.HeaderValueOption
	remove []string
}

// extraHeader returns an extra header as a wireHeader.
func extraHeader(o *corev3.HeaderValueOption) wireHeader {
	h := o.GetHeader()
	return wireHeader{key: validKey(h.GetKey()), value: h.GetRawValue()}
}

// size is the size of the HeaderMutation's fields.
func (m *headerMutation) size() int {
	n := 0
	for i := range m.set {
		n += protowire.SizeTag(fieldSetHeaders) + protowire.SizeBytes(headerOptionSize(&m.set[i]))
	}
	for _, o := range m.extra {
		h := extraHeader(o)
		n += protowire.SizeTag(fieldSetHeaders) + protowire.SizeBytes(headerOptionSize(&h))
	}
	for _, name := range m.remove {
		n += protowire.SizeTag(fieldRemoveHeaders) + protowire.SizeBytes(len(name))
	}
	return n
}

// appendFields appends the HeaderMutation's fields: set_headers, then
// remove_headers, in field order as protobuf-go writes them.
func (m *headerMutation) appendFields(b []byte) []byte {
	for i := range m.set {
		b = appendHeaderOption(b, &m.set[i])
	}
	for _, o := range m.extra {
		h := extraHeader(o)
		b = appendHeaderOption(b, &h)
	}
	for _, name := range m.remove {
		b = append(b, tagRemoveHeaders)
		b = appendString(b, name)
	}
	return b
}

// appendHeaderOption appends a set_headers entry: HeaderValueOption{
// header: HeaderValue{key, raw_value}}.
func appendHeaderOption(b []byte, h *wireHeader) []byte {
	k, v := len(h.key), len(h.value)
	if hv := 2 + k + 2 + v; k > 0 && v > 0 && 2+hv < 0x80 {
		// Every x-ratelimit-* header: a key and a value whose lengths,
		// and the two messages', are one varint byte each. Written in
		// place, with one check of the capacity.
		n := len(b)
		b = slices.Grow(b, 4+hv)[:n+4+hv]
		w := b[n:]
		w[0], w[1], w[2], w[3] = tagSetHeaders, byte(2+hv), tagOptionHeader, byte(hv)
		w[4], w[5] = tagHeaderKey, byte(k)
		copy(w[6:], h.key)
		w[6+k], w[7+k] = tagHeaderRawValue, byte(v)
		copy(w[8+k:], h.value)
		return b
	}
	hv := headerValueSize(h)
	b = append(b, tagSetHeaders)
	b = appendVarint(b, uint64(protowire.SizeTag(fieldOptionHeader)+protowire.SizeBytes(hv)))
	b = append(b, tagOptionHeader)
	b = appendVarint(b, uint64(hv))
	if h.key != "" {
		b = append(b, tagHeaderKey)
		b = appendString(b, h.key)
	}
	if len(h.value) > 0 {
		b = append(b, tagHeaderRawValue)
		b = appendBytes(b, h.value)
	}
	return b
}

// responseHeadersSize is the size of what appendResponseHeaders writes,
// given m.size().
func (m *headerMutation) responseHeadersSize(hm int) int {
	common := protowire.SizeTag(fieldHeaderMutation) + protowire.SizeBytes(hm)
	hr := protowire.SizeTag(fieldHeadersResponse) + protowire.SizeBytes(common)
	return protowire.SizeTag(fieldResponseHeaders) + protowire.SizeBytes(hr)
}

// appendResponseHeaders appends a ProcessingResponse's response_headers
// field: HeadersResponse{response: CommonResponse{header_mutation: m}}.
// hm is m.size().
func (m *headerMutation) appendResponseHeaders(b []byte, hm int) []byte {
	common := protowire.SizeTag(fieldHeaderMutation) + protowire.SizeBytes(hm)
	hr := protowire.SizeTag(fieldHeadersResponse) + protowire.SizeBytes(common)
	b = appendTag(b, fieldResponseHeaders, protowire.BytesType)
	b = appendVarint(b, uint64(hr))
	b = appendTag(b, fieldHeadersResponse, protowire.BytesType)
	b = appendVarint(b, uint64(common))
	b = appendTag(b, fieldHeaderMutation, protowire.BytesType)
	b = appendVarint(b, uint64(hm))
	return m.appendFields(b)
}

// wireReply returns a reply whose encoding is b, the fields appended
// to a buffer the stream borrowed (see lend.go).
func wireReply(b []byte) *extprocv3.ProcessingResponse {
	r := new(extprocv3.ProcessingResponse)
	r.ProtoReflect().SetUnknown(protoreflect.RawFields(b))
	return r
}
