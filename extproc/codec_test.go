package extproc

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestCodecDecodes: the codec decodes a ProcessingRequest however grpc-go
// split its bytes, and hands every other message to grpc-go's protobuf
// codec.
func TestCodecDecodes(t *testing.T) {
	c := newCodec()
	if c.Name() != "proto" {
		t.Errorf("got name %q, want proto", c.Name())
	}
	for i, b := range lifecycleMessages(t, "t1") {
		want := &extprocv3.ProcessingRequest{}
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		for _, at := range []int{0, 1, len(b) / 2, len(b)} {
			got := &extprocv3.ProcessingRequest{}
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:at]), mem.SliceBuffer(b[at:])}, got); err != nil {
				t.Fatalf("message %d split at %d: %v", i, at, err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("message %d split at %d: got\n%s\nwant\n%s", i, at, prototext.Format(got), prototext.Format(want))
			}
		}
	}
	hc := &healthpb.HealthCheckRequest{Service: "envoy.service.ext_proc.v3.ExternalProcessor"}
	got := &healthpb.HealthCheckRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(mustMarshal(t, hc))}, got); err != nil || !proto.Equal(got, hc) {
		t.Errorf("health check request: got %v, %v, want %v", got, err, hc)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &extprocv3.ProcessingRequest{}); err == nil {
		t.Error("a malformed message: got no error")
	}
}

// TestCodecEncodes: every reply the codec encodes is the bytes grpc-go's
// protobuf codec would send: the shared replies, replies in wire form
// (of every size, around grpc-go's pooling threshold too), replies
// built as messages, and a reply in wire form that has a field set too.
func TestCodecEncodes(t *testing.T) {
	c := newCodec()
	replies := map[string]*extprocv3.ProcessingResponse{
		"continue request body":      continueRequestBody,
		"continue response body":     continueResponseBody,
		"continue request trailers":  continueRequestTrailers,
		"continue response trailers": continueResponseTrailers,
		"hold request body":          holdRequestBody,
		"metered headers, all three": meteredHeadersReplies[1][1][1],
		"metered headers, none":      meteredHeadersReplies[0][0][0],
		"a body response, built":     {Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}},
		"an immediate response": {Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
			Body: []byte(`{"error":{}}`)}}},
		"empty": {},
		"wire form and a mode override": func() *extprocv3.ProcessingResponse {
			r := wireReply(appendBytes(appendTag(nil, fieldResponseBody, 2), nil))
			r.ModeOverride = &filterv3.ProcessingMode{ResponseBodyMode: filterv3.ProcessingMode_NONE}
			return r
		}(),
		"wire form and a timeout": func() *extprocv3.ProcessingResponse {
			r := wireReply(appendBytes(appendTag(nil, fieldResponseBody, 2), nil))
			r.OverrideMessageTimeout = durationpb.New(1e9)
			return r
		}(),
	}
	for _, n := range []int{0, 1, 100, 1023, 1024, 1025, 16 << 10, 100 << 10} {
		body := bytes.Repeat([]byte("b"), n)
		replies[fmt.Sprintf("wire form, a %d-byte body", n)] = wireReply(
			appendBytes(appendTag(nil, fieldRequestBody, 2), appendBytes(appendTag(nil, fieldBodyResponse, 2),
				appendBytes(appendTag(nil, fieldBodyMutation, 2), appendBytes(appendTag(nil, fieldMutationBody, 2), body)))))
	}
	for name, r := range replies {
		got, err := c.Marshal(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := mustMarshal(t, r)
		if !bytes.Equal(got.Materialize(), want) {
			t.Errorf("%s: got %x, want %x", name, got.Materialize(), want)
		}
		// Sent as grpc-go sends it: read, then freed. A shared reply's
		// encoding serves the next send unchanged.
		rd := got.Reader()
		if _, err := io.ReadAll(rd); err != nil {
			t.Fatal(err)
		}
		rd.Close()
		got.Free()
		again, err := c.Marshal(r)
		if err != nil || !bytes.Equal(again.Materialize(), want) {
			t.Errorf("%s, sent again: got %x, %v, want %x", name, again.Materialize(), err, want)
		}
	}
	// A nil reply is grpc-go's codec's to encode (as nothing).
	if got, err := c.Marshal((*extprocv3.ProcessingResponse)(nil)); err != nil || got.Len() != 0 {
		t.Errorf("a nil reply: got %d bytes, %v, want none", got.Len(), err)
	}
	if len(c.shared) != 13 {
		t.Errorf("got %d shared replies encoded ahead, want 13", len(c.shared))
	}
}

// TestCodecCopiesWireForm: the encoding of a reply in wire form is a
// copy: its bytes may be borrowed, and given back before grpc-go writes
// them.
func TestCodecCopiesWireForm(t *testing.T) {
	for _, n := range []int{10, 4 << 10} {
		b := appendBytes(appendTag(nil, fieldResponseBody, 2), bytes.Repeat([]byte("x"), n))
		r := wireReply(b)
		out, err := newCodec().Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(b)
		for i := range b {
			b[i] = 0
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%d bytes: the encoding changed with the reply's bytes", n)
		}
	}
}

// TestWireOnlyFields: wireOnly looks at every field of ProcessingResponse.
// A field a newer go-control-plane adds fails here; unlooked at, a reply
// with it set and some bytes in wire form would be sent without it.
func TestWireOnlyFields(t *testing.T) {
	checked := map[string]bool{"request_headers": true, "response_headers": true, "request_body": true,
		"response_body": true, "request_trailers": true, "response_trailers": true, "immediate_response": true,
		"streamed_immediate_response": true, "dynamic_metadata": true, "typed_dynamic_metadata": true,
		"mode_override": true, "request_drain": true, "request_drain_requests": true,
		"request_drain_responses": true, "override_message_timeout": true, "server_window_update": true}
	fields := (&extprocv3.ProcessingResponse{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); !checked[string(f.Name())] {
			t.Errorf("ProcessingResponse.%s (%d): a field wireOnly does not look at", f.Name(), f.Number())
		}
	}
	// Each field set alone makes a reply that is not wire form only.
	for i := range fields.Len() {
		f := fields.Get(i)
		r := &extprocv3.ProcessingResponse{}
		m := r.ProtoReflect()
		switch {
		case f.IsMap():
			mp := m.Mutable(f).Map()
			mp.Set(protoreflect.ValueOfString("k").MapKey(), mp.NewValue())
		case f.Message() != nil:
			m.Set(f, m.NewField(f))
		case f.Kind() == protoreflect.BoolKind:
			m.Set(f, protoreflect.ValueOfBool(true))
		default:
			t.Fatalf("%s: a field of kind %v", f.Name(), f.Kind())
		}
		if wireOnly(r) {
			t.Errorf("with %s set: got wire form only", f.Name())
		}
	}
}
