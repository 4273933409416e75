package extproc

import (
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// metadataField is one field written to a dynamicMetadata.
type metadataField struct {
	key    metaKey
	str    string
	num    float64
	number bool
}

// decodeMetadata encodes fields with dynamicMetadata, marshals the reply
// as gRPC would, and decodes it as Envoy does: it returns the namespace's
// fields.
func decodeMetadata(t *testing.T, fields []metadataField) map[string]*structpb.Value {
	t.Helper()
	var buf [64]byte // small, so that long fields grow the buffer
	md := newDynamicMetadata(buf[:])
	for _, f := range fields {
		if f.number {
			md.num(f.key, f.num)
		} else {
			md.str(f.key, f.str)
		}
	}
	resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
	md.attach(resp)
	wire, err := proto.Marshal(resp)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var got extprocv3.ProcessingResponse
	if err := proto.Unmarshal(wire, &got); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if got.GetResponseBody() == nil {
		t.Fatalf("the reply lost its response_body: %v", &got)
	}
	if len(got.ProtoReflect().GetUnknown()) != 0 {
		t.Fatalf("the receiver sees unknown fields: % x", got.ProtoReflect().GetUnknown())
	}
	outer := got.GetDynamicMetadata().GetFields()
	if len(outer) != 1 {
		t.Fatalf("got namespaces %v, want only %s", outer, MetadataNamespace)
	}
	return outer[MetadataNamespace].GetStructValue().GetFields()
}

// wantMetadata checks decoded fields against what was written; the last
// write of a key wins, as in a map.
func wantMetadata(t *testing.T, got map[string]*structpb.Value, fields []metadataField) {
	t.Helper()
	want := map[string]metadataField{}
	for _, f := range fields {
		f.str = strings.ToValidUTF8(f.str, "\uFFFD")
		want[string(f.key)] = f
	}
	if len(got) != len(want) {
		t.Errorf("got %d fields, want %d: %v", len(got), len(want), got)
	}
	for k, f := range want {
		v, ok := got[k]
		switch {
		case !ok:
			t.Errorf("field %q: missing", k)
		case f.number:
			if n, isNum := v.GetKind().(*structpb.Value_NumberValue); !isNum || math.Float64bits(n.NumberValue) != math.Float64bits(f.num) {
				t.Errorf("field %q: got %v, want number %v", k, v, f.num)
			}
		default:
			if s, isStr := v.GetKind().(*structpb.Value_StringValue); !isStr || s.StringValue != f.str {
				t.Errorf("field %q: got %v, want string %q", k, v, f.str)
			}
		}
	}
}

// TestDynamicMetadataDecodes: what dynamicMetadata writes is what Envoy
// reads as the reply's dynamic_metadata, for every kind of value the
// server writes and the edges of the wire format (lengths past one
// varint byte, an empty value, invalid UTF-8).
func TestDynamicMetadataDecodes(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name   string
		fields []metadataField
	}{
		{"admission", []metadataField{
			{key: "reservation", str: "5f3a9c2e10d4b7a1-2z"}, {key: "estimate_tokens", num: 4520, number: true},
			{key: "estimate_cost", str: "0.002713"}, {key: "api", str: "openai.chat"}, {key: "model", str: "gpt-4o-mini"},
			{key: "decision", str: "admitted"},
		}},
		{"settlement", []metadataField{
			{key: "actual_input_tokens", num: 212, number: true}, {key: "actual_output_tokens", num: 0, number: true},
			{key: "actual_tokens", num: 1 << 53, number: true}, {key: "settled_on", str: "usage"},
		}},
		{"empty value", []metadataField{{key: "model", str: ""}}},
		{"long value", []metadataField{{key: "model", str: long}, {key: metaKey(long), num: -1.5, number: true}}},
		{"many fields", func() (f []metadataField) {
			for i := range 40 {
				f = append(f, metadataField{key: metaKey(strings.Repeat("k", i+1)), str: long[:i*7]})
			}
			return f
		}()},
		{"invalid UTF-8", []metadataField{{key: "model", str: "gpt\xff\xfe-4o"}, {key: "limit", str: "li\xc3mit"}}},
		{"a key twice", []metadataField{{key: "decision", str: "admitted"}, {key: "decision", str: "rejected"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantMetadata(t, decodeMetadata(t, tc.fields), tc.fields)
		})
	}
}

// TestDynamicMetadataEmpty: a dynamicMetadata without fields adds
// nothing to the reply.
func TestDynamicMetadataEmpty(t *testing.T) {
	md := newDynamicMetadata(nil)
	resp := &extprocv3.ProcessingResponse{}
	md.attach(resp)
	if n := proto.Size(resp); n != 0 {
		t.Errorf("got a %d-byte reply, want an empty one", n)
	}
}

// FuzzDynamicMetadata checks any key, string and number the same way. A
// key is one of the Meta* literals, UTF-8, and is made so here.
func FuzzDynamicMetadata(f *testing.F) {
	f.Add("model", "gpt-4o-mini", "estimate_tokens", 4520.0)
	f.Add("", "", "x", math.Inf(1))
	f.Add("k\xff", strings.Repeat("é", 100), "n", -0.0)
	f.Fuzz(func(t *testing.T, sk, sv, nk string, nv float64) {
		fields := []metadataField{
			{key: metaKey(strings.ToValidUTF8(sk, "\uFFFD")), str: sv},
			{key: metaKey(strings.ToValidUTF8(nk, "\uFFFD")), num: nv, number: true},
		}
		wantMetadata(t, decodeMetadata(t, fields), fields)
	})
}

// TestKnownMetadataValues holds what dynamicMetadata.known writes
// unchecked to being UTF-8: the settlement bases, every API's name, the
// cost as formatted, and a reservation ID as the Limiter makes it.
func TestKnownMetadataValues(t *testing.T) {
	values := map[string]string{}
	for _, b := range []Basis{BasisUsage, BasisEstimate, BasisReserved, BasisRefused, BasisRequest} {
		values["basis "+string(b)] = string(b)
	}
	for _, r := range routes {
		values["api of route "+r.suffix] = r.api.Name()
	}
	for suffix, api := range azureAPIs {
		values["azure api "+suffix] = api.Name()
	}
	values["cost"] = formatAmount(accounting.Cost, 123_456_789)
	lim, err := accounting.New(accounting.Options{
		Store:  memstore.New(memstore.Options{}),
		Limits: []accounting.Limit{{Name: "rpm", Algorithm: accounting.FixedWindow, Limit: 10, Window: time.Minute, Scope: []string{"user"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := lim.Reserve(t.Context(), accounting.Request{Attributes: accounting.Attributes{{Name: "user", Value: "\xff\xfe"}}})
	if err != nil || res == nil {
		t.Fatalf("reserve: got %v, %v", res, err)
	}
	values["reservation ID"] = res.ID
	for what, v := range values {
		if v == "" || !utf8.ValidString(v) {
			t.Errorf("%s: got %q, want a non-empty UTF-8 string", what, v)
		}
	}
}
