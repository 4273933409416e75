package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"strconv"

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
	r := new(responseHeadersReply)
	resp := &r.resp
	resp.Response = &r.oneof
	r.oneof.ResponseHeaders = &r.hr
	r.hr.Response = &r.common
	r.common.HeaderMutation = &r.hm
	// The provider's rate-limit headers describe its whole account, not
	// this caller: remove all of them, then set the caller's (Envoy
	// applies removals first). Ours are removed too, by name, in case the
	// upstream sent some that no limit of this request sets.
	r.hm.RemoveHeaders = providerRateLimitHeaders(h, r.remove[:0])
	r.hm.SetHeaders = rateLimitHeaders(&r.rateLimit, &st.res.Dims, nil)
	api := st.target.api
	if st.s.wantsStandardHeaders(api) {
		r.hm.SetHeaders = st.s.standardRateLimitHeaders(api, &st.res.Dims, r.hm.SetHeaders)
	}
	if st.dg.from != "" {
		r.hm.SetHeaders = append(r.hm.SetHeaders, setHeader(DowngradedHeader, st.dg.from+"->"+st.req.Model))
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
	if h.EndOfStream || api == nil {
		var buf [256]byte
		md := newDynamicMetadata(buf[:])
		if st.settle(true, &md) {
			md.attach(resp)
		}
	}
	return resp, false
}

// responseHeadersReply is the reply to a reserved request's response
// headers, allocated in one piece: one is built for every response.
type responseHeadersReply struct {
	resp      extprocv3.ProcessingResponse
	oneof     extprocv3.ProcessingResponse_ResponseHeaders
	hr        extprocv3.HeadersResponse
	common    extprocv3.CommonResponse
	hm        extprocv3.HeaderMutation
	remove    [8]string // room for the provider's rate-limit headers
	rateLimit rateLimitBlock
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
	r := new(struct {
		resp  extprocv3.ProcessingResponse
		oneof extprocv3.ProcessingResponse_ResponseBody
		body  extprocv3.BodyResponse
		meta  [256]byte // the dynamic metadata
	})
	md := newDynamicMetadata(r.meta[:])
	if !st.settle(true, &md) {
		return continueResponseBody, false
	}
	r.resp.Response, r.oneof.ResponseBody = &r.oneof, &r.body
	md.attach(&r.resp)
	return &r.resp, false
}
