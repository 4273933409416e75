package extproc

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/internal/contentcoding"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

func (st *stream) responseHeaders(h *extprocv3.HttpHeaders, attrs map[string]*structpb.Struct) (*extprocv3.ProcessingResponse, bool) {
	if st.responseSeen {
		return st.outOfOrder("response headers")
	}
	st.responseSeen = true
	if s, ok := headerValue(h, ":status"); ok {
		st.status, _ = strconv.Atoi(s)
	}
	st.origin = responseOrigin(st.status, h, attrs)
	if st.res != nil && st.res.HasProviderLimits() {
		// Before the provider's rate-limit headers are removed below.
		st.provider, st.hasProvider = providerState(st.status, st.origin, h)
	}
	if resp, last := st.checkMetered(); last {
		return resp, true
	}
	if st.res == nil {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{}}}, false
	}
	// The provider's rate-limit headers describe its whole account, not
	// this caller: remove all of them, then set the caller's (Envoy
	// applies removals first). Ours are removed too, by name, in case the
	// upstream sent some that no limit of this request sets.
	var removeBuf [8]string // room for the provider's rate-limit headers
	remove := providerRateLimitHeaders(h, removeBuf[:0])
	for i, name := range remove {
		remove[i] = validKey(name)
	}
	var text [3 * numDims * 24]byte
	setBuf, n := rateLimitValues(&st.res.Dims, text[:0])
	set := setBuf[:n]
	api := st.target.api
	// Headers the options add, built as messages: after the
	// x-ratelimit-* ones.
	var extra []*corev3.HeaderValueOption
	if st.s.wantsStandardHeaders(api) {
		extra = st.s.standardRateLimitHeaders(api, &st.res.Dims, extra)
	}
	if st.dg.from != "" {
		extra = append(extra, setHeader(DowngradedHeader, st.dg.from+"->"+st.req.Model))
	}
	if api != nil && st.ok() && st.origin == fromUpstream && st.responseBodyUnseen && !h.EndOfStream {
		// The filter sends no response body: what was generated cannot
		// be seen, so the reservation stands, as for an encoding that
		// cannot be read (settling on the output seen would charge none).
		st.unreadable = true
	} else if api != nil && st.ok() && st.origin == fromUpstream {
		ct, _ := headerValue(h, "content-type")
		reader := api.NewUsageReader(&st.req, ct, llm.ReaderOptions{Counter: st.s.opts.Counter, MaxBuffer: st.s.opts.MaxBuffer})
		if enc, _ := headerValue(h, "content-encoding"); enc != "" && enc != "identity" {
			// Bytes go to the client untouched; the reader sees them
			// decoded, incrementally.
			dec, err := contentcoding.NewDecoder(enc, reader.Write, maxDecoded)
			if err != nil {
				st.s.log.Warn("response encoding not supported; settling on the reservation", "api", api.Name(), "err", err)
				st.unreadable = true
			} else {
				st.reader, st.decoder = reader, dec
			}
		} else {
			st.reader = reader
		}
	}
	var md []byte
	if h.EndOfStream || api == nil {
		var buf [256]byte
		m := newDynamicMetadata(buf[:])
		if st.settle(true, &m) {
			md = m.wire()
		}
	}
	hm := headerMutation{set: set, extra: extra, remove: remove}
	size := hm.size()
	r, b := newWireReply(hm.responseHeadersSize(size) + len(md))
	b = hm.appendResponseHeaders(b, size)
	return r.done(append(b, md...)), false
}

func (st *stream) ok() bool { return st.status >= 200 && st.status < 300 }

func (st *stream) responseBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	if resp, last := st.checkMetered(); last {
		return resp, true
	}
	if st.reader != nil && len(b.Body) > 0 {
		if st.decoder != nil {
			// An error (corrupt data, the size bound) stops decoding; the
			// settlement then uses what was read before it.
			_ = st.decoder.Write(b.Body)
		} else {
			st.reader.Write(b.Body)
		}
	}
	if !b.EndOfStream {
		return continueResponseBody, false
	}
	// Settle before this reply: once the client has the whole response,
	// the counters already show it.
	r, md := newEndReply()
	if !st.settle(true, &md) {
		return continueResponseBody, false
	}
	return r.done(&md), false
}

// endReply is the reply to a response's last chunk, with the
// settlement's dynamic metadata, written in wire form (see replywire.go)
// in one allocation: the response_body field, an empty BodyResponse,
// then the metadata.
type endReply struct {
	resp extprocv3.ProcessingResponse
	buf  [256]byte
}

// newEndReply returns an endReply and the metadata to write into it.
func newEndReply() (*endReply, dynamicMetadata) {
	r := new(endReply)
	b := appendTag(r.buf[:0], fieldResponseBody, protowire.BytesType)
	b = appendVarint(b, 0)
	return r, newDynamicMetadata(b[len(b):])
}

// done returns the reply with md's fields.
func (r *endReply) done(md *dynamicMetadata) *extprocv3.ProcessingResponse {
	b := append(r.buf[:protowire.SizeTag(fieldResponseBody)+protowire.SizeVarint(0)], md.wire()...)
	r.resp.ProtoReflect().SetUnknown(protoreflect.RawFields(b))
	return &r.resp
}
