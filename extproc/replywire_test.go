package extproc

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// responseHeadersMessage is the reply appendResponseHeaders writes, built
// as protobuf-go messages: what the wire form must encode to.
func responseHeadersMessage(m *headerMutation, md map[string]any) *extprocv3.ProcessingResponse {
	hm := &extprocv3.HeaderMutation{RemoveHeaders: m.remove}
	for _, h := range m.set {
		hm.SetHeaders = append(hm.SetHeaders, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: h.key, RawValue: h.value}})
	}
	hm.SetHeaders = append(hm.SetHeaders, m.extra...)
	resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: hm}}}}
	if md != nil {
		fields, err := structpb.NewStruct(md)
		if err != nil {
			panic(err)
		}
		resp.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{
			MetadataNamespace: structpb.NewStructValue(fields)}}
	}
	return resp
}

// wireResponseHeaders is responseHeaders' own way of writing m, with
// md's fields (strings and numbers) as dynamic metadata.
func wireResponseHeaders(m *headerMutation, md map[string]any) []byte {
	var w []byte
	if md != nil {
		d := newDynamicMetadata(nil)
		for k, v := range md {
			switch v := v.(type) {
			case string:
				d.str(metaKey(k), v)
			case float64:
				d.num(metaKey(k), v)
			}
		}
		w = d.wire()
	}
	size := m.size()
	var st stream
	b := st.borrow(m.responseHeadersSize(size) + len(w))
	resp := wireReply(append(m.appendResponseHeaders(b, size), w...))
	out, err := proto.Marshal(resp)
	if err != nil {
		panic(err)
	}
	return out
}

// TestResponseHeadersWire: the response-headers reply written in wire
// form encodes to the bytes protobuf-go writes for the same messages,
// and decodes to them.
func TestResponseHeadersWire(t *testing.T) {
	long := strings.Repeat("v", 300) // lengths of two varint bytes
	many := make([]wireHeader, 40)   // a mutation over 1 KiB: a buffer of its own
	for i := range many {
		many[i] = wireHeader{key: "x-ratelimit-remaining-requests", value: []byte("123456789")}
	}
	for _, tc := range []struct {
		name string
		m    headerMutation
		md   map[string]any
	}{
		{"empty", headerMutation{}, nil},
		{"rate limits", headerMutation{set: []wireHeader{
			{"x-ratelimit-limit-requests", []byte("1125899906842624")},
			{"x-ratelimit-remaining-requests", []byte("1125899906842623")},
			{"x-ratelimit-reset-requests", []byte("60ms")},
			{"x-ratelimit-limit-cost", []byte("1.000000")},
		}}, nil},
		{"removals", headerMutation{remove: []string{"x-ratelimit-limit-tokens", "anthropic-ratelimit-requests-limit", ""}}, nil},
		{"empty key and value", headerMutation{set: []wireHeader{{"", []byte("v")}, {"k", nil}, {"", nil}}}, nil},
		{"long value", headerMutation{set: []wireHeader{{"x-long", []byte(long)}}, remove: []string{long}}, nil},
		{"many", headerMutation{set: many}, nil},
		{"extra", headerMutation{
			set: []wireHeader{{"x-ratelimit-limit-tokens", []byte("100")}},
			extra: []*corev3.HeaderValueOption{setHeader("ratelimit-policy", `"tokens";q=100;w=60`),
				setHeader(DowngradedHeader, "gpt-4o->gpt-4o-mini")},
			remove: []string{"x-ratelimit-limit-tokens"},
		}, nil},
		{"metadata", headerMutation{set: []wireHeader{{"x-ratelimit-limit-tokens", []byte("100")}}},
			map[string]any{MetaActualTokens: 42.0, MetaSettledOn: "usage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := responseHeadersMessage(&tc.m, tc.md)
			// Map fields are in no particular order unless deterministic;
			// one entry per map keeps the order fixed for the comparison.
			if len(tc.md) > 1 {
				compareDecoded(t, wireResponseHeaders(&tc.m, tc.md), want)
				return
			}
			wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got := wireResponseHeaders(&tc.m, tc.md)
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("got\n%x\nwant\n%x", got, wantBytes)
			}
			compareDecoded(t, got, want)
		})
	}
}

// compareDecoded decodes b and compares it with want.
func compareDecoded(t *testing.T, b []byte, want *extprocv3.ProcessingResponse) {
	t.Helper()
	got := &extprocv3.ProcessingResponse{}
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("decoded\n%v\nwant\n%v", got, want)
	}
}

// FuzzResponseHeadersWire holds the wire form to protobuf-go's encoding
// for any headers and names: keys and names as a received message has
// them (UTF-8: protobuf-go refuses any other), values any bytes.
func FuzzResponseHeadersWire(f *testing.F) {
	f.Add("x-ratelimit-limit-tokens", []byte("100"), "x-ratelimit-reset-tokens", uint8(3), uint16(0))
	f.Add("", []byte{}, "", uint8(0), uint16(200))
	f.Add("k\xff", []byte{0, 0xff}, "ratelimit\x80", uint8(1), uint16(20000))
	// Around the one-byte lengths of the short headers' fast path.
	f.Add(strings.Repeat("k", 62), bytes.Repeat([]byte("v"), 64), "ratelimit", uint8(15), uint16(0))
	f.Add(strings.Repeat("k", 120), []byte("12"), "", uint8(15), uint16(30))
	f.Fuzz(func(t *testing.T, key string, value []byte, name string, n uint8, pad uint16) {
		key, name = validKey(key), validKey(name)
		value = append(value, bytes.Repeat([]byte("x"), int(pad))...)
		var m headerMutation
		for i := range int(n % 16) {
			m.set = append(m.set, wireHeader{key: key, value: value[:len(value)*i/16]})
			m.remove = append(m.remove, name)
		}
		if n&1 != 0 {
			m.extra = append(m.extra, setHeader(key, string(value)))
		}
		want, err := proto.Marshal(responseHeadersMessage(&m, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := wireResponseHeaders(&m, nil); !bytes.Equal(got, want) {
			t.Errorf("got\n%x\nwant\n%x", got, want)
		}
	})
}

// TestResponseHeadersReply: the reply a reserved request's response
// headers get, from the stream itself, is the mutation the rate-limit
// figures and the provider's headers make, and nothing else.
func TestResponseHeadersReply(t *testing.T) {
	msgs := decoded(t, lifecycleMessages(t, "t1"))
	st := newStream(lifecycleServer(t), context.Background())
	var resp *extprocv3.ProcessingResponse
	for _, m := range msgs[:3] {
		resp, _ = st.handle(m)
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	got := &extprocv3.ProcessingResponse{}
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	hm := got.GetResponseHeaders().GetResponse().GetHeaderMutation()
	var set []string
	for _, o := range hm.GetSetHeaders() {
		set = append(set, o.GetHeader().GetKey()+"="+string(o.GetHeader().GetRawValue()))
	}
	wantSet := []string{
		"x-ratelimit-limit-requests=1125899906842624", "x-ratelimit-remaining-requests=1125899906842623", "x-ratelimit-reset-requests=",
		"x-ratelimit-limit-tokens=1125899906842624", "x-ratelimit-remaining-tokens=", "x-ratelimit-reset-tokens=",
		"x-ratelimit-limit-cost=1125899906.842624", "x-ratelimit-remaining-cost=", "x-ratelimit-reset-cost=",
	}
	if len(set) != len(wantSet) {
		t.Fatalf("got headers %q, want %d", set, len(wantSet))
	}
	for i, w := range wantSet {
		if !strings.HasPrefix(set[i], w) || (strings.HasSuffix(w, "=") && len(set[i]) == len(w)) {
			t.Errorf("header %d: got %q, want %q and a value", i, set[i], w)
		}
	}
	wantRemove := []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-limit-tokens",
		"x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"}
	if got := hm.GetRemoveHeaders(); strings.Join(got, ",") != strings.Join(wantRemove, ",") {
		t.Errorf("got removals %q, want %q", got, wantRemove)
	}
	if got.GetDynamicMetadata() != nil || got.GetModeOverride() != nil {
		t.Errorf("got %v, want the header mutation alone", got)
	}
}

// TestMeteredHeadersReplies: each shared reply to a metered request's
// headers removes what its case needs, and only a forged routing header
// has the route matched again.
func TestMeteredHeadersReplies(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		strip, streamed, forged bool
		remove                  []string
	}{
		{"plain", false, false, false, nil},
		{"strip", true, false, false, []string{"accept-encoding"}},
		{"streamed", false, true, false, []string{"content-length"}},
		{"strip streamed", true, true, false, []string{"accept-encoding", "content-length"}},
		{"forged", false, false, true, []string{RouteModelHeader}},
		{"strip forged", true, false, true, []string{"accept-encoding", RouteModelHeader}},
		{"streamed forged", false, true, true, []string{"content-length", RouteModelHeader}},
		{"all", true, true, true, []string{"accept-encoding", "content-length", RouteModelHeader}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hr := meteredHeadersReplies[b2i(tc.strip)][b2i(tc.streamed)][b2i(tc.forged)].GetRequestHeaders()
			if hr == nil {
				t.Fatal("got no request headers reply")
			}
			if got := hr.GetResponse().GetHeaderMutation().GetRemoveHeaders(); strings.Join(got, ",") != strings.Join(tc.remove, ",") {
				t.Errorf("got removals %q, want %q", got, tc.remove)
			}
			if got := hr.GetResponse().GetClearRouteCache(); got != tc.forged {
				t.Errorf("got clear_route_cache %v, want %v", got, tc.forged)
			}
			if got := hr.GetResponse().GetHeaderMutation().GetSetHeaders(); got != nil {
				t.Errorf("got headers set %v, want none", got)
			}
		})
	}
}

// TestWireFieldNumbers: the field numbers the replies are written with
// are those of the messages' descriptors, and their tags one byte each.
func TestWireFieldNumbers(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  protowire.Number
		msg  proto.Message
	}{
		{"response_headers", fieldResponseHeaders, &extprocv3.ProcessingResponse{}},
		{"request_body", fieldRequestBody, &extprocv3.ProcessingResponse{}},
		{"response_body", fieldResponseBody, &extprocv3.ProcessingResponse{}},
		{"dynamic_metadata", fieldDynamicMetadata, &extprocv3.ProcessingResponse{}},
		{"response", fieldHeadersResponse, &extprocv3.HeadersResponse{}},
		{"response", fieldBodyResponse, &extprocv3.BodyResponse{}},
		{"header_mutation", fieldHeaderMutation, &extprocv3.CommonResponse{}},
		{"body_mutation", fieldBodyMutation, &extprocv3.CommonResponse{}},
		{"clear_route_cache", fieldClearRouteCache, &extprocv3.CommonResponse{}},
		{"body", fieldMutationBody, &extprocv3.BodyMutation{}},
		{"set_headers", fieldSetHeaders, &extprocv3.HeaderMutation{}},
		{"remove_headers", fieldRemoveHeaders, &extprocv3.HeaderMutation{}},
		{"header", fieldOptionHeader, &corev3.HeaderValueOption{}},
		{"key", fieldHeaderKey, &corev3.HeaderValue{}},
		{"raw_value", fieldHeaderRawValue, &corev3.HeaderValue{}},
		{"fields", structFields, &structpb.Struct{}},
		{"number_value", valueNumber, &structpb.Value{}},
		{"string_value", valueString, &structpb.Value{}},
		{"struct_value", valueStructValue, &structpb.Value{}},
	} {
		d := tc.msg.ProtoReflect().Descriptor()
		f := d.Fields().ByName(protoreflect.Name(tc.name))
		if f == nil || f.Number() != tc.got {
			t.Errorf("%s.%s: got field number %d, want the descriptor's (%v)", d.FullName(), tc.name, tc.got, f)
		}
		if tc.got >= 16 {
			t.Errorf("%s.%s: got field number %d, want one below 16 (a one-byte tag)", d.FullName(), tc.name, tc.got)
		}
	}
}

// TestExtraHeadersAreKeyAndValue: the headers that go into replies
// written in wire form as messages (the IETF and Anthropic headers, a
// downgrade's) carry a key and a raw value and nothing else, which is
// all the wire form writes of them.
func TestExtraHeadersAreKeyAndValue(t *testing.T) {
	var dims [numDims]accounting.DimState
	for i := range dims {
		dims[i] = accounting.DimState{Applied: true, Limit: 1000, Remaining: 10, Reset: 1500 * time.Millisecond, Window: time.Minute}
	}
	st := &stream{dg: downgrade{to: "gpt-4o-mini", path: "/v1/chat/completions", from: "gpt-4o"}}
	for _, tc := range []struct {
		name    string
		headers []*corev3.HeaderValueOption
	}{
		{"IETF", appendIETF(&dims, nil)},
		{"Anthropic", appendAnthropic(&dims, time.Unix(1700000000, 0), nil)},
		{"downgrade", st.downgradeHeaders(nil)},
		{"downgraded", []*corev3.HeaderValueOption{setHeader(DowngradedHeader, "gpt-4o->gpt-4o-mini")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.headers) == 0 {
				t.Fatal("got no headers")
			}
			for _, o := range tc.headers {
				want := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: o.GetHeader().GetKey(), RawValue: o.GetHeader().GetRawValue()}}
				if !proto.Equal(o, want) {
					t.Errorf("got %v, want a key and a raw value only", o)
				}
			}
		})
	}
}
