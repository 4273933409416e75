package extproc

import (
	"log/slog"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// The headers of a downgrade (a limit's on_exhausted.downgrade_to).
const (
	// RouteModelHeader is set on a downgraded request to the model it
	// now names, for the proxy's routes: a route that matches it can send
	// the fallback to another upstream (the reply clears Envoy's route
	// cache, so the route is chosen again on the edited headers).
	RouteModelHeader = "x-tokenwarden-model"
	// DowngradedHeader is set on a downgraded request's response to
	// "from->to", the model the client named and the model that answered.
	DowngradedHeader = "x-tokenwarden-downgraded"
)

// downgrade is what a stream keeps of a downgrade: the fallback the
// limiter was last asked about, with the request edited for it, and once
// admitted there, the model and limit it came from.
type downgrade struct {
	to   string
	path string // the :path that names to; "" when the path is unchanged
	body []byte // the body that names to; nil when the body is unchanged
	// from is the model the client named, set once the request is
	// admitted on to; limit the limit that refused it on from.
	from, limit string
}

// downgrader returns the function [accounting.Limiter.ReserveOrDowngrade]
// asks whether this request can go to a fallback model, or nil when it
// never can: no limit downgrades, the API cannot name another model
// (llm.ModelSetter), or an Azure deployment's path decides the model.
// Asked, it edits the request for the fallback, and keeps the edit (the
// last one only: memory stays within two bodies). A path edit needs a
// header mutation, which a STREAMED body's reply cannot carry.
func (st *stream) downgrader(body []byte) func(model string) bool {
	ms, ok := st.target.api.(llm.ModelSetter)
	if !ok || st.target.model != "" || st.target.azureBody || !st.s.opts.Limiter.Downgrades() {
		return nil
	}
	return func(model string) bool {
		st.dg = downgrade{}
		path, edited, err := ms.SetModel(st.path, body, model)
		if err != nil || (path != "" && st.bodyMode == filterv3.ProcessingMode_STREAMED) {
			return false
		}
		st.dg = downgrade{to: model, path: path, body: edited}
		return true
	}
}

// downgraded records an admission on a fallback model in place of the
// refusal refused, and returns the outcome to count: downgraded, or
// failed_open when the store failed on the fallback's reservation and
// its limits let it through unreserved (the store failure is what an
// operator must see).
func (st *stream) downgraded(refused, res *accounting.Reservation) string {
	st.dg.from, st.dg.limit = shownModel(st.req.Model), refused.Trip.Limit.Name
	st.req.Model = res.Model
	family := accounting.ModelFamily(res.Model)
	for i := range st.attrs {
		if st.attrs[i].Name == AttributeModel {
			st.attrs[i].Value = family
		}
	}
	if st.learning {
		// What the fallback generates teaches the fallback's estimate.
		st.learnKey.Model = family
	}
	if st.s.log.Enabled(st.ctx, slog.LevelDebug) {
		st.s.log.Debug("downgraded", "api", apiName(st.target.api), "from", st.dg.from, "to", res.Model, "limit", st.dg.limit)
	}
	if res.FailedOpen {
		return string(accounting.OutcomeFailedOpen)
	}
	return string(accounting.OutcomeDowngraded)
}

// shownModel returns the model a client named as a response header and
// the access log may show it: itself when it is a short run of printable
// ASCII, as model names are, or else its family, which is the family of
// a configured limit's match.model (the downgrade followed it). The name
// is the client's: "\r\n…/gpt-4o" or a kilobyte of prefix before the
// last '/' is still gpt-4o to the limits, and must not reach a header.
func shownModel(model string) string {
	if len(model) > MaxModelBytes {
		return accounting.ModelFamily(model)
	}
	for i := 0; i < len(model); i++ {
		if model[i] < 0x20 || model[i] > 0x7e {
			return accounting.ModelFamily(model)
		}
	}
	return model
}

// downgradeHeaders appends the request headers a downgrade sets: the
// routing header, and the edited path.
func (st *stream) downgradeHeaders(set []*corev3.HeaderValueOption) []*corev3.HeaderValueOption {
	set = append(set, setHeader(RouteModelHeader, st.dg.to))
	if st.dg.path != "" {
		set = append(set, setHeader(":path", st.dg.path))
	}
	return set
}
