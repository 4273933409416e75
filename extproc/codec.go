package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// codec is the gRPC codec of a server hosting tokenwarden
// ([Server.ServerOptions]). It decodes Envoy's messages by hand
// (requestwire.go), and encodes without protobuf-go the replies that
// need no encoding: those every stream shares, whose encoding it keeps,
// and those written in wire form (replywire.go), whose encoding is
// their bytes. Every other message goes to grpc-go's protobuf codec.
// protobuf-go's encoder sizes a message and then writes it, walking it
// twice through tables and reflection; for a chat completion's ten
// replies that was about 18 k instructions, 4% of the lifecycle.
type codec struct {
	proto encoding.CodecV2
	// shared maps each reply that streams share (they are never
	// modified) to its encoding, which is never modified either: grpc-go
	// only reads the buffers it sends, and frees them (a no-op for a
	// SliceBuffer). So one BufferSlice serves every send of the reply,
	// and sending it allocates nothing. That is how grpc-go 1.85
	// behaves, not what its codec interface promises: re-check it when
	// upgrading grpc-go (TestCodecEncodes reads and frees an encoding
	// as grpc-go does, then sends the reply again).
	shared map[*extprocv3.ProcessingResponse]mem.BufferSlice
}

func newCodec() codec {
	c := codec{proto: encoding.GetCodecV2(grpcproto.Name), shared: map[*extprocv3.ProcessingResponse]mem.BufferSlice{}}
	shared := []*extprocv3.ProcessingResponse{continueRequestBody, continueResponseBody,
		continueRequestTrailers, continueResponseTrailers, holdRequestBody}
	for _, a := range meteredHeadersReplies {
		for _, b := range a {
			shared = append(shared, b[:]...)
		}
	}
	for _, r := range shared {
		// (A reply that failed to encode would be left to protobuf-go,
		// and fail there, as it would without this.)
		if b, err := proto.Marshal(r); err == nil {
			c.shared[r] = mem.BufferSlice{mem.SliceBuffer(b)}
		}
	}
	return c
}

// Name is the proto codec's, which this codec stands in for. (Forced,
// it answers every call whatever its content-subtype; a reply's
// content-type is the request's.)
func (c codec) Name() string { return grpcproto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*extprocv3.ProcessingResponse); ok && r != nil {
		if data, ok := c.shared[r]; ok {
			return data, nil
		}
		if wireOnly(r) {
			return copied(r.ProtoReflect().GetUnknown()), nil
		}
	}
	return c.proto.Marshal(v)
}

// wireOnly reports whether r is a reply written in wire form: every
// field unset, its bytes its unknown fields, which protobuf-go would
// encode verbatim and alone. (TestWireOnlyFields fails when
// go-control-plane adds a field this does not look at.)
func wireOnly(r *extprocv3.ProcessingResponse) bool {
	return r.Response == nil && r.DynamicMetadata == nil && r.TypedDynamicMetadata == nil && r.ModeOverride == nil &&
		!r.RequestDrain && !r.RequestDrainRequests && !r.RequestDrainResponses &&
		r.OverrideMessageTimeout == nil && r.ServerWindowUpdate == nil
}

// copied is b in a buffer of grpc-go's, as its protobuf codec encodes
// into: b may be lent (lend.go), and is given back once Send returns,
// while grpc-go's writer may not have written it yet.
func copied(b []byte) mem.BufferSlice {
	if mem.IsBelowBufferPoolingThreshold(len(b)) {
		return mem.BufferSlice{mem.SliceBuffer(clone(b))}
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(len(b))
	copy(*buf, b)
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*extprocv3.ProcessingRequest)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	// grpc-go materializes the message as its own codec does, and frees
	// the buffer when decoding returns: everything decoded is a copy.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return decodeRequest(buf.ReadOnlyData(), m)
}
