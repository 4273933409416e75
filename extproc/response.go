package extproc

import (
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
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
		st.provider, st.hasProvider = providerState(st.status, st.origin, h, time.Now())
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
	b := st.borrow(hm.responseHeadersSize(size) + len(md))
	b = hm.appendResponseHeaders(b, size)
	return wireReply(append(b, md...)), false
}

func (st *stream) ok() bool { return st.status >= 200 && st.status < 300 }

func (st *stream) responseBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	if resp, last := st.checkMetered(); last {
		return resp, true
	}
	if len(b.Body) > 0 {
		st.bodySeen = true
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
	field, md := st.endReply()
	if !st.settle(true, &md) {
		return continueResponseBody, false
	}
	return wireReply(append(field, md.wire()...)), false
}

// endReply begins the reply to a response's last chunk, which carries
// the settlement's dynamic metadata, in wire form (see replywire.go): it
// returns the response_body field, an empty BodyResponse, in a buffer
// the stream borrowed (see lend.go), and the metadata to write into the
// room after it. Append the metadata's wire form to the field.
func (st *stream) endReply() ([]byte, dynamicMetadata) {
	b := st.borrow(endReplyRoom)
	b = appendTag(b, fieldResponseBody, protowire.BytesType)
	b = appendVarint(b, 0)
	return b, newDynamicMetadata(b[len(b):])
}

// endReplyRoom is the room borrowed for the reply to a response's last
// chunk: the usual settlement's metadata (about 150 bytes); more grows
// the reply's buffer once.
const endReplyRoom = 256
