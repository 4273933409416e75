package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// The usage API's bounds.
const (
	// defaultTopN is how many counters /top lists without n=.
	defaultTopN = 10
	// maxResetBody bounds a reset's request body.
	maxResetBody = 64 << 10
	// maxOperatorBytes bounds the operator name a reset is logged with.
	maxOperatorBytes = 128
	// operatorHeader names who asks for a reset, for the log.
	operatorHeader = "X-Tokenwarden-Operator"
)

// usageAPI serves the usage API on the admin listener: what a caller has
// used and has left on every limit, the heaviest counters of a limit, and
// a counter's reset. It reads the store through the Limiter's read side
// (accounting.Inspector) and never charges anything.
//
// Every request asks state for the config and the Limiter in force, so
// that a reload's limits, identity attributes and admin token apply to
// the next request, as they do to the next stream.
type usageAPI struct {
	state func() (*config.Config, *accounting.Limiter)
	log   *slog.Logger
	// resets counts resets by limit: tokenwarden_admin_resets_total.
	resets *prometheus.CounterVec
	now    func() time.Time
	// topSlot lets one Top run at a time: each may scan the store.
	topSlot chan struct{}
}

// newUsageAPI returns the usage API on what state returns. reg may be
// nil.
func newUsageAPI(state func() (*config.Config, *accounting.Limiter), log *slog.Logger, reg prometheus.Registerer) *usageAPI {
	a := &usageAPI{
		state: state,
		log:   log,
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_admin_resets_total",
			Help: "Counters reset through the admin usage API, by limit.",
		}, []string{"limit"}),
		now:     time.Now,
		topSlot: make(chan struct{}, 1),
	}
	if reg != nil {
		reg.MustRegister(a.resets)
	}
	if cfg, _ := state(); loopbackOnly(cfg) {
		log.Warn("the admin usage API answers loopback clients only (kubectl port-forward, kubectl exec): set admin_token_file to reach it over the network", "admin", cfg.Admin)
	}
	return a
}

// usageCall is what one request of the usage API runs on.
type usageCall struct {
	cfg     *config.Config
	limiter *accounting.Limiter
}

// known reports whether a query may name the attribute: an identity
// attribute of the config, model or api.
func (c usageCall) known(name string) bool {
	if name == extproc.AttributeModel || name == extproc.AttributeAPI {
		return true
	}
	for _, src := range c.cfg.Server.Identity.Attributes {
		if src.Name == name {
			return true
		}
	}
	return false
}

// knownNames lists the attribute names a query may give, sorted.
func (c usageCall) knownNames() []string {
	names := []string{extproc.AttributeModel, extproc.AttributeAPI}
	for _, src := range c.cfg.Server.Identity.Attributes {
		names = append(names, src.Name)
	}
	slices.Sort(names)
	return names
}

// withUsageAPI serves the usage API under /v1/ and everything else with
// admin.
func withUsageAPI(admin http.Handler, a *usageAPI) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", admin)
	mux.HandleFunc("/v1/", a.endpoint("", func(w http.ResponseWriter, r *http.Request, _ usageCall) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.URL.Path)
	}))
	mux.HandleFunc("/v1/usage", a.endpoint(http.MethodGet, a.usage))
	mux.HandleFunc("/v1/limits", a.endpoint(http.MethodGet, a.limits))
	mux.HandleFunc("/v1/limits/{name}/usage", a.endpoint(http.MethodGet, a.counterUsage))
	mux.HandleFunc("/v1/limits/{name}/top", a.endpoint(http.MethodGet, a.top))
	mux.HandleFunc("/v1/limits/{name}/reset", a.endpoint(http.MethodPost, a.reset))
	return mux
}

// usageHandler is one endpoint of the usage API.
type usageHandler func(w http.ResponseWriter, r *http.Request, c usageCall)

// endpoint checks the token, the peer and the method (any when method
// is "") before h runs on the config in force, answering JSON either
// way.
func (a *usageAPI) endpoint(method string, h usageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cfg, limiter := a.state()
		if !authorized(r, cfg.AdminToken) {
			a.log.Warn("admin usage API: unauthorized", "remote_addr", r.RemoteAddr, "path", truncate(r.URL.Path, 256))
			w.Header().Set("WWW-Authenticate", `Bearer realm="tokenwarden"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "this endpoint needs Authorization: Bearer <the token in admin_token_file>")
			return
		}
		if loopbackOnly(cfg) && !loopbackPeer(r.RemoteAddr) {
			a.log.Warn("admin usage API: refused a peer beyond loopback (no admin_token_file)", "remote_addr", r.RemoteAddr, "path", truncate(r.URL.Path, 256))
			writeError(w, http.StatusForbidden, "forbidden", "without admin_token_file the usage API answers loopback clients only")
			return
		}
		if cfg.AdminToken == "" {
			if why := browserReach(r); why != "" {
				a.log.Warn("admin usage API: refused a web page or a Host beyond loopback (no admin_token_file)", "why", why, "remote_addr", r.RemoteAddr, "path", truncate(r.URL.Path, 256))
				writeError(w, http.StatusForbidden, "forbidden", "without admin_token_file the usage API answers loopback tools only (curl to localhost), not "+why)
				return
			}
		}
		if method != "" && r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here; use "+method)
			return
		}
		h(w, r, usageCall{cfg: cfg, limiter: limiter})
	}
}

// GET /v1/limits: the limits as configured.
func (a *usageAPI) limits(w http.ResponseWriter, r *http.Request, c usageCall) {
	out := struct {
		Limits []limitJSON `json:"limits"`
	}{Limits: []limitJSON{}}
	for _, l := range c.limiter.Limits() {
		out.Limits = append(out.Limits, describeLimit(&l))
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/usage?tenant=acme&user=u1: every limit a request with these
// attributes would be charged on, and its counter's state. The request
// is the one whose headers (and metadata) give these values: an
// attribute not given takes its default, as the request's would, and the
// answer lists the attributes it describes, defaults included.
func (a *usageAPI) usage(w http.ResponseWriter, r *http.Request, c usageCall) {
	given, err := queryAttributes(r, c)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	attrs := c.cfg.Server.Identity.WithDefaults(given)
	usage, err := c.limiter.Usage(r.Context(), attrs)
	if err != nil {
		a.writeStoreError(w, err)
		return
	}
	out := struct {
		Attributes map[string]string `json:"attributes"`
		Limits     []limitUsageJSON  `json:"limits"`
	}{Attributes: map[string]string{}, Limits: []limitUsageJSON{}}
	for _, at := range attrs {
		out.Attributes[at.Name] = at.Value
	}
	for _, u := range usage {
		out.Limits = append(out.Limits, limitUsageJSON{describeLimit(u.Limit), a.describeCounter(u)})
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/limits/{name}/usage?tenant=acme: one counter of one limit,
// named by its scope values.
func (a *usageAPI) counterUsage(w http.ResponseWriter, r *http.Request, c usageCall) {
	lim, ok := limitOf(w, r, c)
	if !ok {
		return
	}
	attrs, err := queryAttributes(r, c)
	if err == nil {
		// The attribute a limit_from reads may come too: the counter
		// is then shown at the value it gives.
		err = scopeOnly(lim, attrs, valueAttribute(lim))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	u, err := c.limiter.CounterUsage(r.Context(), lim.Name, attrs)
	if err != nil {
		a.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, limitUsageJSON{describeLimit(u.Limit), a.describeCounter(u)})
}

// GET /v1/limits/{name}/top?n=10&scan=10000: the limit's heaviest
// counters, from a bounded scan of the store.
func (a *usageAPI) top(w http.ResponseWriter, r *http.Request, c usageCall) {
	lim, ok := limitOf(w, r, c)
	if !ok {
		return
	}
	q, err := urlQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	for k := range q {
		if k != "n" && k != "scan" {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("unknown parameter %q (want n, scan)", k))
			return
		}
	}
	n, err := intParam(q, "n", defaultTopN, accounting.MaxTopN)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	scan, err := intParam(q, "scan", accounting.DefaultTopScan, accounting.MaxTopScan)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	select {
	case a.topSlot <- struct{}{}:
		defer func() { <-a.topSlot }()
	default:
		writeError(w, http.StatusTooManyRequests, "busy", "another top scan is running; try again when it is done")
		return
	}
	top, err := c.limiter.Top(r.Context(), lim.Name, n, scan)
	if err != nil {
		a.writeStoreError(w, err)
		return
	}
	out := struct {
		Limit    limitJSON     `json:"limit"`
		Counters []counterJSON `json:"counters"`
		Scanned  int           `json:"scanned"`
		Complete bool          `json:"complete"`
	}{Limit: describeLimit(lim), Counters: []counterJSON{}, Scanned: top.Scanned, Complete: top.Complete}
	for _, u := range top.Counters {
		out.Counters = append(out.Counters, a.describeCounter(u))
	}
	writeJSON(w, http.StatusOK, out)
}

// resetRequest is a reset's body.
type resetRequest struct {
	// Scope names the counter: a value for every attribute of the
	// limit's scope, and nothing else.
	Scope map[string]string `json:"scope"`
	// Reason is logged with the reset.
	Reason string `json:"reason"`
}

// POST /v1/limits/{name}/reset {"scope": {"tenant": "acme"}}: start one
// counter afresh. Logged at warn with who asked, and counted.
func (a *usageAPI) reset(w http.ResponseWriter, r *http.Request, c usageCall) {
	lim, ok := limitOf(w, r, c)
	if !ok {
		return
	}
	var req resetRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxResetBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "the body must be a JSON object {\"scope\": {\"attribute\": \"value\", ...}, \"reason\": \"...\"}: "+err.Error())
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "bad_request", "the body must hold one JSON object")
		return
	}
	attrs := make(accounting.Attributes, 0, len(req.Scope))
	for _, k := range slices.Sorted(maps.Keys(req.Scope)) {
		attrs = append(attrs, accounting.Attribute{Name: k, Value: req.Scope[k]})
	}
	if err := scopeOnly(lim, attrs, ""); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	before, existed, err := c.limiter.ResetCounter(r.Context(), lim.Name, attrs)
	if err != nil {
		a.writeStoreError(w, err)
		return
	}
	a.resets.WithLabelValues(lim.Name).Inc()
	scope := a.describeCounter(before).Scope
	a.log.Warn("counter reset",
		"limit", lim.Name, "scope", scope, "existed", existed,
		"used_before", before.Used, "remaining_before", before.Remaining,
		"remote_addr", r.RemoteAddr, "operator", operator(r), "reason", truncate(req.Reason, 1024))
	writeJSON(w, http.StatusOK, struct {
		Limit   string            `json:"limit"`
		Scope   map[string]string `json:"scope_values"`
		Existed bool              `json:"existed"`
		Before  counterJSON       `json:"before"`
	}{lim.Name, scope, existed, a.describeCounter(before)})
}

// operator returns who asked, as the request says (the operator header,
// bounded), for the log only: it is not authentication.
func operator(r *http.Request) string {
	return truncate(r.Header.Get(operatorHeader), maxOperatorBytes)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// limitOf returns the limit the path names, or answers 404.
func limitOf(w http.ResponseWriter, r *http.Request, c usageCall) (*accounting.Limit, bool) {
	name := r.PathValue("name")
	lim, ok := c.limiter.Limit(name)
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_limit", fmt.Sprintf("no limit is named %q (GET /v1/limits lists them)", name))
	}
	return lim, ok
}

// queryAttributes reads identity attributes from the query, each given
// once and each a name the config knows.
func queryAttributes(r *http.Request, c usageCall) (accounting.Attributes, error) {
	q, err := urlQuery(r)
	if err != nil {
		return nil, err
	}
	var attrs accounting.Attributes
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !c.known(k) {
			return nil, fmt.Errorf("unknown attribute %q (known: %s)", k, strings.Join(c.knownNames(), ", "))
		}
		if len(q[k]) != 1 {
			return nil, fmt.Errorf("attribute %q is given %d times", k, len(q[k]))
		}
		attrs = append(attrs, accounting.Attribute{Name: k, Value: q[k][0]})
	}
	return attrs, nil
}

// urlQuery parses the query strictly: a malformed one is an error, not
// silently shortened.
func urlQuery(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("malformed query: %v", err)
	}
	return q, nil
}

// scopeOnly checks that attrs are lim's scope, and besides it at most
// the attribute extra (when not ""): a counter is named by all of its
// scope values and by nothing else.
func scopeOnly(lim *accounting.Limit, attrs accounting.Attributes, extra string) error {
	for _, at := range attrs {
		if !slices.Contains(lim.Scope, at.Name) && at.Name != extra {
			return fmt.Errorf("limit %q is per %s; %q is not part of its scope", lim.Name, scopeName(lim), at.Name)
		}
	}
	var missing []string
	for _, s := range lim.Scope {
		if _, ok := attrs.Get(s); !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("limit %q is per %s; give %s", lim.Name, scopeName(lim), strings.Join(missing, ", "))
	}
	return nil
}

// valueAttribute names the attribute lim's limit_from reads, or "".
func valueAttribute(lim *accounting.Limit) string {
	if lim.From == nil {
		return ""
	}
	return lim.From.Attribute
}

func scopeName(lim *accounting.Limit) string {
	if len(lim.Scope) == 0 {
		return "nothing (one global counter)"
	}
	return strings.Join(lim.Scope, "+")
}

// intParam reads an integer parameter within 1..most, def when absent.
func intParam(q map[string][]string, name string, def, most int) (int, error) {
	vs, ok := q[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(vs[0])
	if len(vs) != 1 || err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%s must be one whole number from 1 to %d", name, most)
	}
	return n, nil
}

// writeStoreError answers a failure of the Limiter's read side.
func (a *usageAPI) writeStoreError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, accounting.ErrUnknownLimit):
		writeError(w, http.StatusNotFound, "unknown_limit", err.Error())
	case errors.Is(err, accounting.ErrScopeMissing):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, accounting.ErrNotInspectable):
		writeError(w, http.StatusNotImplemented, "not_implemented", err.Error())
	case errors.Is(err, accounting.ErrStoreUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", err.Error())
	default:
		a.log.Error("admin usage API", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}
