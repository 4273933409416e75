package extproc

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// release is the reply that releases a reserved request body to the
// upstream: the body to send in place of Envoy's (nil: Envoy's, as it
// is), the headers that go with it, and the dynamic metadata of the
// admission. One is sent for every admitted request.
//
// A body up to maxWireRelease bytes is written in its wire form, as the
// response-headers reply is (see replywire.go): the body is copied once
// more, into the reply, which costs less than what protobuf-go spends
// walking the reply's seven messages, twice, to encode them. A larger
// body goes in messages: protobuf-go copies it straight from the edit
// into the encoded reply, and a megabyte is not copied twice for the
// sake of a microsecond. TestReleaseWire and FuzzReleaseWire hold the
// two forms to the same bytes.
type release struct {
	body []byte
	// length sets content-length to len(body) (not for a STREAMED body,
	// whose chunk replies cannot set headers).
	length bool
	// extra are further headers to set (a downgrade's), after
	// content-length; clearRoute has Envoy match the route again.
	extra      []*corev3.HeaderValueOption
	clearRoute bool
}

// maxWireRelease is the largest body a release writes in wire form.
const maxWireRelease = 8 << 10

// metaRoom is the room a release built as messages has for its dynamic
// metadata: the admission's fields, a model name of up to MaxModelBytes
// among them. More moves the metadata to a buffer of its own.
const metaRoom = 512

// wireMetaRoom is the room a release written in wire form leaves for
// its dynamic metadata: enough for the usual admission's (about 200
// bytes); more grows the reply's buffer once.
const wireMetaRoom = 320

// reply returns the release, with st's admission metadata (see
// stream.admissionMetadata).
func (p *release) reply(st *stream) *extprocv3.ProcessingResponse {
	if len(p.body) > maxWireRelease {
		return p.messages(st)
	}
	return p.wire(st)
}

// common reports whether the release has a CommonResponse: anything
// beyond the continuation of the body as Envoy holds it.
func (p *release) common() bool {
	return p.body != nil || p.length || p.extra != nil || p.clearRoute
}

// wire writes the release in wire form.
func (p *release) wire(st *stream) *extprocv3.ProcessingResponse {
	var digits [20]byte
	var length [1]wireHeader
	hm := headerMutation{extra: p.extra}
	if p.length {
		length[0] = wireHeader{key: "content-length", value: strconv.AppendInt(digits[:0], int64(len(p.body)), 10)}
		hm.set = length[:]
	}
	hasHeaders := p.length || p.extra != nil
	// CommonResponse, BodyResponse and the request_body field.
	common, hmSize := 0, 0
	if hasHeaders {
		hmSize = hm.size()
		common += protowire.SizeTag(fieldHeaderMutation) + protowire.SizeBytes(hmSize)
	}
	mutation := 0
	if p.body != nil {
		mutation = protowire.SizeTag(fieldMutationBody) + protowire.SizeBytes(len(p.body))
		common += protowire.SizeTag(fieldBodyMutation) + protowire.SizeBytes(mutation)
	}
	if p.clearRoute {
		common += protowire.SizeTag(fieldClearRouteCache) + protowire.SizeVarint(1)
	}
	body := 0
	if p.common() {
		body = protowire.SizeTag(fieldBodyResponse) + protowire.SizeBytes(common)
	}
	size := protowire.SizeTag(fieldRequestBody) + protowire.SizeBytes(body)

	b := st.borrow(size + wireMetaRoom)
	b = appendTag(b, fieldRequestBody, protowire.BytesType)
	b = appendVarint(b, uint64(body))
	if p.common() {
		b = appendTag(b, fieldBodyResponse, protowire.BytesType)
		b = appendVarint(b, uint64(common))
		if hasHeaders {
			b = appendTag(b, fieldHeaderMutation, protowire.BytesType)
			b = appendVarint(b, uint64(hmSize))
			b = hm.appendFields(b)
		}
		if p.body != nil {
			b = appendTag(b, fieldBodyMutation, protowire.BytesType)
			b = appendVarint(b, uint64(mutation))
			b = appendTag(b, fieldMutationBody, protowire.BytesType)
			b = appendBytes(b, p.body)
		}
		if p.clearRoute {
			b = appendTag(b, fieldClearRouteCache, protowire.VarintType)
			b = appendVarint(b, 1)
		}
	}
	// The metadata is written in the room after the reply's fields, then
	// moved down to meet them (see dynamicMetadata's headroom).
	md := newDynamicMetadata(b[len(b):])
	st.admissionMetadata(&md)
	return wireReply(append(b, md.wire()...))
}

// releaseMessages is a release built as messages, allocated in one
// piece.
type releaseMessages struct {
	resp     extprocv3.ProcessingResponse
	oneof    extprocv3.ProcessingResponse_RequestBody
	body     extprocv3.BodyResponse
	common   extprocv3.CommonResponse
	mutation extprocv3.BodyMutation
	edited   extprocv3.BodyMutation_Body
	hm       extprocv3.HeaderMutation
	set      [1]*corev3.HeaderValueOption
	opt      corev3.HeaderValueOption
	length   corev3.HeaderValue
	digits   [20]byte
	meta     [metaRoom]byte // the dynamic metadata
}

// messages builds the release as messages.
func (p *release) messages(st *stream) *extprocv3.ProcessingResponse {
	r := new(releaseMessages)
	r.resp.Response, r.oneof.RequestBody = &r.oneof, &r.body
	md := newDynamicMetadata(r.meta[:])
	st.admissionMetadata(&md)
	md.attach(&r.resp)
	if p.common() {
		r.body.Response = &r.common
	}
	if p.body != nil {
		r.common.BodyMutation, r.mutation.Mutation, r.edited.Body = &r.mutation, &r.edited, p.body
	}
	if p.length {
		r.common.HeaderMutation, r.hm.SetHeaders = &r.hm, r.set[:]
		r.set[0], r.opt.Header = &r.opt, &r.length
		r.length.Key, r.length.RawValue = "content-length", strconv.AppendInt(r.digits[:0], int64(len(p.body)), 10)
	}
	if p.extra != nil {
		r.common.HeaderMutation = &r.hm
		r.hm.SetHeaders = append(r.hm.SetHeaders, p.extra...)
	}
	r.common.ClearRouteCache = p.clearRoute
	return &r.resp
}
