package extproc

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
)

// releaseStream is a stream admitted on model, as much of one as a
// release's metadata reads; from, when set, is the model it was
// downgraded from.
func releaseStream(model, from string) *stream {
	res := &accounting.Reservation{ID: "0123456789abcdef-1a", Cost: 1234,
		Estimate: accounting.Estimate{InputTokens: 300, OutputTokens: 4096}}
	st := &stream{target: target{api: openai.Chat{}}, req: llm.Request{Model: model}, res: res}
	if from != "" {
		st.dg = downgrade{to: model, from: from, limit: "tenant-tokens"}
		res.ShadowRejected = []*accounting.Limit{{Name: "shadow-a"}, {Name: "shadow-b"}}
		res.Wait = accounting.Wait{Outcome: "admitted", Took: 1500 * time.Millisecond}
	}
	return st
}

// encodedRelease returns what protobuf-go encodes of p written in wire
// form and built as messages.
func encodedRelease(t *testing.T, p *release, st *stream) (wire, messages []byte) {
	t.Helper()
	var err error
	if wire, err = proto.Marshal(p.wire(st)); err != nil {
		t.Fatal(err)
	}
	if messages, err = proto.Marshal(p.messages(st)); err != nil {
		t.Fatal(err)
	}
	return wire, messages
}

// TestReleaseWire: a release written in wire form encodes to the bytes
// protobuf-go writes for the release built as messages, for every shape
// a release takes, and it decodes to the body and headers it releases.
func TestReleaseWire(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	long := bytes.Repeat([]byte("x"), 20000) // lengths of three varint bytes
	dg := func() []*corev3.HeaderValueOption {
		return []*corev3.HeaderValueOption{setHeader(RouteModelHeader, "gpt-4o-mini"), setHeader(":path", "/v1/chat/completions")}
	}
	for _, tc := range []struct {
		name  string
		p     release
		model string
		from  string
	}{
		{"unchanged", release{}, "gpt-4o-mini", ""},
		{"edited", release{body: body, length: true}, "gpt-4o-mini", ""},
		{"edited, streamed", release{body: body}, "gpt-4o-mini", ""},
		{"empty body", release{body: []byte{}, length: true}, "gpt-4o-mini", ""},
		{"long body", release{body: long, length: true}, "gpt-4o-mini", ""},
		{"downgraded", release{body: body, length: true, extra: dg(), clearRoute: true}, "gpt-4o-mini", "gpt-4o"},
		{"downgraded, body unchanged", release{extra: dg(), clearRoute: true}, "gpt-4o-mini", "gpt-4o"},
		{"long model", release{body: body, length: true}, strings.Repeat("m", 400), ""},
		{"invalid UTF-8 model", release{body: body}, "gpt\xff", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := releaseStream(tc.model, tc.from)
			wire, messages := encodedRelease(t, &tc.p, st)
			if !bytes.Equal(wire, messages) {
				t.Fatalf("got\n%x\nwant\n%x", wire, messages)
			}
			got := &extprocv3.ProcessingResponse{}
			if err := proto.Unmarshal(wire, got); err != nil {
				t.Fatal(err)
			}
			common := got.GetRequestBody().GetResponse()
			if b := common.GetBodyMutation().GetBody(); !bytes.Equal(b, tc.p.body) || (b == nil) != (tc.p.body == nil) {
				t.Errorf("got body %.40q, want %.40q", b, tc.p.body)
			}
			var set []string
			for _, o := range common.GetHeaderMutation().GetSetHeaders() {
				set = append(set, o.GetHeader().GetKey())
			}
			want := 0
			if tc.p.length {
				want++
			}
			if len(set) != want+len(tc.p.extra) || (tc.p.length && set[0] != "content-length") {
				t.Errorf("got headers %q, want content-length %v and %d more", set, tc.p.length, len(tc.p.extra))
			}
			if common.GetClearRouteCache() != tc.p.clearRoute {
				t.Errorf("got clear_route_cache %v, want %v", common.GetClearRouteCache(), tc.p.clearRoute)
			}
			md := got.GetDynamicMetadata().GetFields()[MetadataNamespace].GetStructValue().GetFields()
			if md[MetaReservation].GetStringValue() != st.res.ID {
				t.Errorf("got metadata %v, want the reservation's", md)
			}
		})
	}
}

// FuzzReleaseWire holds the wire form of a release to the messages'
// encoding for any body, model name and shape.
func FuzzReleaseWire(f *testing.F) {
	f.Add([]byte(`{"model":"m"}`), "gpt-4o", uint8(1), uint16(0))
	f.Add([]byte(nil), "", uint8(14), uint16(300))
	f.Add([]byte{0xff, 0}, "m\x80", uint8(15), uint16(9000))
	f.Fuzz(func(t *testing.T, body []byte, model string, shape uint8, pad uint16) {
		p := release{body: body, length: shape&1 != 0, clearRoute: shape&2 != 0}
		if body != nil {
			p.body = append(body, bytes.Repeat([]byte("x"), int(pad))...)
		}
		for range shape >> 2 & 3 {
			p.extra = append(p.extra, setHeader(RouteModelHeader, validKey(model)))
		}
		from := ""
		if shape&16 != 0 {
			from = "from"
		}
		wire, messages := encodedRelease(t, &p, releaseStream(model, from))
		if !bytes.Equal(wire, messages) {
			t.Errorf("got\n%x\nwant\n%x", wire, messages)
		}
	})
}

// TestEndReplyWire: the reply to a response's last chunk, written in
// wire form, encodes to the bytes protobuf-go writes for the same reply
// built as messages, however long its metadata.
func TestEndReplyWire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		settled string
	}{
		{"usage", string(BasisUsage)},
		{"metadata longer than the reply's room", strings.Repeat("s", 400)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := func(md *dynamicMetadata) {
				md.num(MetaActualInputTokens, 12)
				md.num(MetaActualOutputTokens, 34)
				md.str(MetaSettledOn, tc.settled)
			}
			var st stream
			field, md := st.endReply()
			fields(&md)
			got, err := proto.Marshal(wireReply(append(field, md.wire()...)))
			if err != nil {
				t.Fatal(err)
			}
			want := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
			wmd := newDynamicMetadata(nil)
			fields(&wmd)
			wmd.attach(want)
			wantBytes, err := proto.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("got\n%x\nwant\n%x", got, wantBytes)
			}
		})
	}
}
