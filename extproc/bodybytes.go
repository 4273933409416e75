package extproc

import (
	"fmt"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/internal/bodybudget"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// RequestBytes bounds the request bodies a server holds at once, so that
// no burst of large bodies, whoever sends it, takes the process past its
// memory. A metered request's body is charged at its headers — its
// content-length, or the most a body may be when none is announced —
// against the bytes in flight and against its principal's share of them,
// and refused there when it does not fit: Envoy then never sends it. The
// charge is given back once the reply that releases the body (or refuses
// the request) has been sent; a request that a limit's wait_up_to holds
// keeps it while it waits.
type RequestBytes struct {
	// InFlight is the most bytes of request bodies the server holds at
	// once. Zero means the default for the memory the process is given
	// (its cgroup's limit or the Go runtime's, whichever is less; 1 GiB
	// without either): see [DefaultRequestBytes].
	InFlight int64
	// PerPrincipal is the most of them one principal holds at once; zero
	// means a quarter of InFlight. At most InFlight.
	PerPrincipal int64
	// Principal names the identity attributes whose values tell one
	// principal from another; nil means Identity.Required. With neither,
	// there is one principal, which may hold all of InFlight.
	Principal []string
}

// DefaultRequestBytes returns the RequestBytes.InFlight and PerPrincipal
// a server has by default, for the memory the process is given, and that
// memory with where its figure comes from (cgroup, gomemlimit or
// fallback).
func DefaultRequestBytes() (inFlight, perPrincipal, memory int64, source string) {
	memory, source = bodybudget.Memory()
	inFlight, perPrincipal = bodybudget.Default(memory)
	return inFlight, perPrincipal, memory, source
}

// limits returns the budget's total and share, defaults applied.
func (o *RequestBytes) limits(identity *Identity) (total, share int64) {
	total, share = o.InFlight, o.PerPrincipal
	if total == 0 {
		total, _, _, _ = DefaultRequestBytes()
	}
	if share == 0 {
		share = total / 4
	}
	if len(o.principal(identity)) == 0 {
		share = total
	}
	return total, share
}

// principal returns the attributes that name a principal.
func (o *RequestBytes) principal(identity *Identity) []string {
	if o.Principal != nil {
		return o.Principal
	}
	return identity.Required
}

// bodyBytes is a server's budget of request bytes in flight with its
// collectors: one per NewServer, shared by the servers Reload makes, so
// that the bodies streams hold under earlier options count against the
// new ones.
type bodyBytes struct {
	budget  *bodybudget.Budget
	inUse   prometheus.Gauge
	limit   *prometheus.GaugeVec // of: in_flight, per_principal
	refused *prometheus.CounterVec
	// The refusals' children, by bodybudget.Outcome.
	refusedBy [bodybudget.TooLarge + 1]prometheus.Counter
}

func newBodyBytes(reg prometheus.Registerer) *bodyBytes {
	b := &bodyBytes{
		budget: bodybudget.New(0, 0),
		inUse: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tokenwarden_request_bytes_in_flight",
			Help: "Bytes of request bodies this replica holds: charged at a metered request's headers (its content-length), given back once the body is released to the upstream or refused.",
		}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tokenwarden_request_bytes_limit",
			Help: "The most bytes of request bodies this replica holds at once (of=in_flight, request_bytes.in_flight), and the most one principal holds of them (of=per_principal).",
		}, []string{"of"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_request_bytes_refused_total",
			Help: "Requests refused at their headers because their body did not fit the replica's request bytes in flight: per_principal (429: the principal holds its share), too_large (429: the body alone is more than a principal's share), in_flight (503: the replica holds its whole budget).",
		}, []string{"reason"}),
	}
	b.refusedBy[bodybudget.OverShare] = b.refused.WithLabelValues("per_principal")
	b.refusedBy[bodybudget.TooLarge] = b.refused.WithLabelValues("too_large")
	b.refusedBy[bodybudget.Full] = b.refused.WithLabelValues("in_flight")
	if reg != nil {
		reg.MustRegister(b.inUse, b.limit, b.refused)
	}
	return b
}

// setLimits applies opts' limits to the budget.
func (b *bodyBytes) setLimits(opts *Options) {
	total, share := opts.RequestBytes.limits(&opts.Identity)
	b.budget.SetLimits(total, share)
	b.limit.WithLabelValues("in_flight").Set(float64(total))
	b.limit.WithLabelValues("per_principal").Set(float64(share))
}

// RequestBytesLimits returns the bytes of request bodies the server holds
// at once, at most, and the most one principal holds of them: the
// options' figures, defaults applied.
func (s *Server) RequestBytesLimits() (inFlight, perPrincipal int64) {
	return s.current().bb.budget.Limits()
}

// chargeBody charges a metered request's body to its principal, before
// Envoy sends it: its content-length, or, with none, the most a body may
// be. It returns the reply that refuses the request, and true, when the
// body does not fit.
func (st *stream) chargeBody(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, bool) {
	size, known := int64(maxRequestBody), false
	if v, ok := headerValue(h, "content-length"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			size, known = n, true
		}
	}
	api := st.target.api
	if size > maxRequestBody {
		st.count(api, "bad_request")
		return badRequest(api, "request body too large"), true
	}
	st.principal = st.principalOf()
	if !known {
		// At most a principal's share: a body without a length is not
		// refused as too large for it before anything of it is known.
		// One that turns out larger is charged the rest when it
		// arrives (see fitBody).
		_, share := st.s.bb.budget.Limits()
		size = min(size, share)
	}
	if o := st.s.bb.budget.Charge(st.principal, size); o != bodybudget.Admitted {
		return st.refuseBody(o, size), true
	}
	st.bodyCharge, st.bodyLength = size, -1
	if known {
		st.bodyLength = size
	}
	st.s.bb.inUse.Add(float64(size))
	return nil, false
}

// fitBody makes the body's charge cover n bytes, as much as has arrived:
// a body without a content-length may be larger than its charge (Envoy
// holds one with a length to it). It returns the reply that refuses the
// request, and true, when the rest does not fit.
func (st *stream) fitBody(n int) (*extprocv3.ProcessingResponse, bool) {
	if int64(n) <= st.bodyCharge {
		return nil, false
	}
	if o := st.s.bb.budget.Resize(st.principal, st.bodyCharge, int64(n)); o != bodybudget.Admitted {
		return st.refuseBody(o, int64(n)), true
	}
	st.s.bb.inUse.Add(float64(int64(n) - st.bodyCharge))
	st.bodyCharge = int64(n)
	return nil, false
}

// replied is told that the reply to the message just handled has been
// sent (or failed to be): once a decision's reply has, the server holds
// the request body no longer.
func (st *stream) replied() {
	if st.decided {
		st.releaseBody()
	}
}

// releaseBody gives back the body's charge: the reply that releases the
// body or refuses the request has been sent, or the stream ended.
func (st *stream) releaseBody() {
	if st.bodyCharge == 0 {
		return
	}
	st.s.bb.budget.Release(st.principal, st.bodyCharge)
	st.s.bb.inUse.Sub(float64(st.bodyCharge))
	st.bodyCharge = 0
}

// principalOf returns the key of the request's principal: the value of
// the one attribute that names it, or each value prefixed with its
// length, so that no two principals share a key. An absent attribute
// counts as empty: callers without it share one principal.
func (st *stream) principalOf() string {
	names := st.s.opts.RequestBytes.principal(&st.s.opts.Identity)
	if len(names) == 1 {
		v, _ := st.attrs.Get(names[0])
		return v
	}
	var key []byte
	for _, name := range names {
		v, _ := st.attrs.Get(name)
		key = strconv.AppendInt(key, int64(len(v)), 10)
		key = append(key, ':')
		key = append(key, v...)
	}
	return string(key)
}

// refuseBody is the reply to a request whose body of size bytes did not
// fit (outcome o). A principal at its share, or a body larger than the
// share, gets a 429: what the caller holds decides. A replica at its
// whole budget answers 503, as for any overload that is not the
// caller's doing. When room comes back depends on when the bodies in
// flight are decided, which no one knows in advance: like a concurrent
// limit's refusal, one that may be retried says a second, long enough
// not to hammer the replica and short enough to find room soon after it
// frees.
func (st *stream) refuseBody(o bodybudget.Outcome, size int64) *extprocv3.ProcessingResponse {
	api := st.target.api
	st.s.bb.refusedBy[o].Inc()
	total, share := st.s.bb.budget.Limits()
	retry := []*corev3.HeaderValueOption{setHeader("retry-after", "1"), setHeader("retry-after-ms", "1000")}
	switch o {
	case bodybudget.TooLarge:
		st.count(api, "bytes_rejected")
		return immediate(api, llm.Error{Kind: llm.RateLimited, Code: "request_too_large",
			Message: fmt.Sprintf("Request body of %d bytes is larger than the %d bytes of request bodies one caller may have in flight on this server. Retrying will not help: send a smaller body.", size, share)},
			"tokenwarden_request_bytes", []*corev3.HeaderValueOption{setHeader("x-should-retry", "false")})
	case bodybudget.OverShare:
		st.count(api, "bytes_rejected")
		return immediate(api, llm.Error{Kind: llm.RateLimited, Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("Too many request bytes in flight: this request's %d bytes and the caller's other requests being admitted are more than the %d bytes of request bodies one caller may have in flight on this server. Please try again in 1s.", size, share)},
			"tokenwarden_request_bytes", retry)
	}
	st.count(api, "bytes_unavailable")
	return immediate(api, llm.Error{Kind: llm.Unavailable, Code: "overloaded",
		Message: fmt.Sprintf("The server holds as many request bytes as it may (%d) and cannot take this request's %d now. Please try again shortly.", total, size)},
		"tokenwarden_request_bytes", retry)
}
