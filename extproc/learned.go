package extproc

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/learned"
)

// LearnedOutput reserves, in place of a request's whole output cap, what
// completions of its model and API have recently produced: a quantile of
// their reported output, learned per replica in bounded memory. Most
// completions stop far short of their cap, and a reservation of the cap
// holds budget they never use: a tenant at 50,000 tokens a minute with a
// 4096 cap cannot have twelve requests in flight, whatever they produce.
//
// The cap still bounds what the provider may generate (it is in the body,
// injected when the request had none), and settlement charges the usage
// reported, so a completion longer than its reservation is charged in
// full: what learning gives up is only the guarantee that a request's
// charge never exceeds what it reserved. Each request in flight can
// exceed its reservation by at most its cap less the learned estimate,
// so the most a limit's window can be overspent is the sum of that over
// the requests in flight at once: concurrency × (cap − learned), at
// worst. The overspend is a debt: the counter holds it, and later
// requests wait until the window frees it.
//
// Only completions settled on a final usage report feed the estimate
// (never an estimate, a cut stream's running total or a refusal), one
// sample per request, of its output per choice. A request whose
// settlement has no usage report is charged as without learning: its
// whole cap. Background responses reserve their cap.
//
// The zero value is off; the zero value of every other field is its
// default.
type LearnedOutput struct {
	Enabled bool
	// Quantile is the share of recent completions the reservation
	// covers, in (0, 1); zero means DefaultLearnedQuantile.
	Quantile float64
	// MinSamples is how many completions of a model and API must be seen
	// before their estimate is used; zero means DefaultLearnedMinSamples.
	MinSamples int64
	// DecaySamples is how many recent completions the estimate follows
	// (each new one weighs the older ones down by 1 − 1/DecaySamples);
	// zero means DefaultLearnedDecaySamples.
	DecaySamples int64
	// Floor is the least output reserved per choice, whatever was
	// learned; zero means DefaultLearnedFloor.
	Floor int64
	// MaxKeys bounds the estimates a replica keeps (about 1 KiB each),
	// the least recently used going first; zero means
	// DefaultLearnedMaxKeys.
	MaxKeys int
	// Scope lists identity attributes that key the estimate beside the
	// model and the API: with [tenant], each tenant's completions set its
	// own reservations, and one tenant's short completions cannot shrink
	// another's. A request without one of these attributes reserves
	// its cap and is not learned from.
	Scope []string
}

// The defaults of LearnedOutput.
const (
	DefaultLearnedQuantile     = 0.95
	DefaultLearnedMinSamples   = 50
	DefaultLearnedDecaySamples = 1000
	DefaultLearnedFloor        = 256
	DefaultLearnedMaxKeys      = 4096
)

// MaxLearnedKeys is the largest LearnedOutput.MaxKeys: about 1 GiB of
// estimates.
const MaxLearnedKeys = 1 << 20

// withDefaults returns o with every zero field at its default.
func (o LearnedOutput) withDefaults() LearnedOutput {
	o.Quantile = cmp.Or(o.Quantile, DefaultLearnedQuantile)
	o.MinSamples = cmp.Or(o.MinSamples, DefaultLearnedMinSamples)
	o.DecaySamples = cmp.Or(o.DecaySamples, max(DefaultLearnedDecaySamples, o.MinSamples))
	o.Floor = cmp.Or(o.Floor, DefaultLearnedFloor)
	o.MaxKeys = cmp.Or(o.MaxKeys, DefaultLearnedMaxKeys)
	return o
}

func (o LearnedOutput) estimatorOptions() learned.Options {
	return learned.Options{Quantile: o.Quantile, MinSamples: o.MinSamples, DecaySamples: o.DecaySamples, Floor: o.Floor, MaxKeys: o.MaxKeys}
}

// Validate reports the problems of the options, each an
// [accounting.FieldError] named by its key under
// estimation.learned_output. Settings are checked whether or not
// Enabled is, so that a bad one is found before the day it is turned on.
func (o *LearnedOutput) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, accounting.FieldErrorf(field, format, args...))
	}
	d := o.withDefaults()
	if !(d.Quantile > 0 && d.Quantile < 1) {
		bad("quantile", "%v is not in (0, 1)", o.Quantile)
	}
	if d.MinSamples < 1 {
		bad("min_samples", "%d is below 1", o.MinSamples)
	}
	switch {
	case d.DecaySamples < d.MinSamples:
		bad("decay_samples", "%d is below min_samples (%d)", d.DecaySamples, d.MinSamples)
	case d.DecaySamples > learned.MaxDecaySamples:
		bad("decay_samples", "%d is above %d", d.DecaySamples, learned.MaxDecaySamples)
	}
	if d.Floor < 1 || d.Floor > MaxOutputCap {
		bad("floor", "%d is outside 1..%d", o.Floor, MaxOutputCap)
	}
	if d.MaxKeys < 1 || d.MaxKeys > MaxLearnedKeys {
		bad("max_keys", "%d is outside 1..%d", o.MaxKeys, MaxLearnedKeys)
	}
	seen := map[string]bool{}
	for i, a := range o.Scope {
		switch {
		case a == "":
			bad(fmt.Sprintf("scope[%d]", i), "must not be empty")
		case a == AttributeModel || a == AttributeAPI:
			bad(fmt.Sprintf("scope[%d]", i), "%q is always part of the key", a)
		case seen[a]:
			bad(fmt.Sprintf("scope[%d]", i), "%q is listed twice", a)
		}
		seen[a] = true
	}
	if len(errs) == 0 {
		// The estimator's own checks, in case they are stricter.
		eo := d.estimatorOptions()
		if err := eo.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// learner is the server's learned-output estimator and its metrics; nil
// when LearnedOutput is off.
type learner struct {
	opts LearnedOutput
	est  *learned.Estimator

	requests  [numLearnedUses]prometheus.Counter // by how the output was reserved
	capTokens prometheus.Counter
	reserved  prometheus.Counter
	overshoot prometheus.Counter
}

// learnedUse is how a request's output was reserved.
type learnedUse uint8

const (
	useLearned learnedUse = iota // the learned estimate, below the cap
	useCap                       // the cap: the estimate reaches it
	useWarming                   // the cap: fewer than MinSamples seen
	numLearnedUses
)

var learnedUseNames = [numLearnedUses]string{"learned", "cap", "warming"}

// learnedMetrics are the collectors of learned output estimates,
// registered whether or not learning is on, so that every server
// exports the same series. A Server makes them once: a reload keeps them
// (see [Server.Reload]), and live is the learner new streams use.
type learnedMetrics struct {
	requests  *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	overshoot prometheus.Counter
	keys      prometheus.GaugeFunc
	live      atomic.Pointer[learner]
}

func newLearnedMetrics(reg prometheus.Registerer) *learnedMetrics {
	m := &learnedMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_learned_output_requests_total",
			Help: "Requests with an output cap, with estimation.learned_output on, by how their output was reserved: learned (the learned estimate, below the cap), cap (the estimate reaches the cap), warming (fewer than min_samples completions seen: the cap).",
		}, []string{"estimate"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_learned_output_tokens_total",
			Help: "Output tokens of requests with estimation.learned_output on: cap (what the output cap would have reserved), reserved (what was reserved).",
		}, []string{"kind"}),
		overshoot: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tokenwarden_learned_output_overshoot_tokens_total",
			Help: "Output tokens reported beyond what was reserved for the output, charged at settlement: what learned estimates let requests spend before their limits saw it.",
		}),
	}
	m.keys = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tokenwarden_learned_output_keys",
		Help: "Learned output estimates this replica holds (model, API and scope tuples; at most estimation.learned_output.max_keys).",
	}, func() float64 {
		if l := m.live.Load(); l != nil {
			return float64(l.est.Len())
		}
		return 0
	})
	if reg != nil {
		reg.MustRegister(m.requests, m.tokens, m.overshoot, m.keys)
	}
	return m
}

// newLearner returns the learner o describes, counting in m; nil when
// learning is off.
func newLearner(o LearnedOutput, m *learnedMetrics) (*learner, error) {
	if !o.Enabled {
		return nil, nil
	}
	o = o.withDefaults()
	est, err := learned.New(o.estimatorOptions())
	if err != nil {
		return nil, err
	}
	l := &learner{opts: o, est: est}
	for i := range l.requests {
		l.requests[i] = m.requests.WithLabelValues(learnedUseNames[i])
	}
	l.capTokens, l.reserved = m.tokens.WithLabelValues("cap"), m.tokens.WithLabelValues("reserved")
	l.overshoot = m.overshoot
	return l, nil
}

// sameEstimator reports whether a learner made from o would learn
// exactly as l does, so that a reload can keep what l has learned.
func (l *learner) sameEstimator(o LearnedOutput) bool {
	if l == nil || !o.Enabled {
		return false
	}
	o = o.withDefaults()
	return o.estimatorOptions() == l.opts.estimatorOptions() && slices.Equal(o.Scope, l.opts.Scope)
}

// key returns the estimate's key for a request of api on model (its
// family) with attrs, and false when attrs lack one of the scope's
// attributes: as a limit does not hold a request without its scope, such
// a request is not learned from and reserves its cap, rather than share
// one estimate with every other request that lacks it. Only a scope
// costs an allocation.
func (l *learner) key(api, model string, attrs accounting.Attributes) (learned.Key, bool) {
	k := learned.Key{API: api, Model: model}
	if len(l.opts.Scope) == 0 {
		return k, true
	}
	// Length-prefixed, as counter keys are: no value can imitate a
	// boundary.
	var b strings.Builder
	for _, name := range l.opts.Scope {
		v, ok := attrs.Get(name)
		if !ok {
			return learned.Key{}, false
		}
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	k.Scope = b.String()
	return k, true
}

// reserve returns the output a request reserves per choice: the learned
// estimate when there is one below the cap, else the cap; and how.
func (l *learner) reserve(k learned.Key, outputCap int64) (int64, learnedUse) {
	tokens, _, ok := l.est.Estimate(k)
	switch {
	case !ok:
		return outputCap, useWarming
	case tokens >= outputCap:
		return outputCap, useCap
	}
	return tokens, useLearned
}

// learnedEstimate returns the estimate the stream's request reserves:
// est, its estimate on the cap, with the output replaced by the learned
// one when learning is on and has one. It records the key the
// settlement feeds.
func (st *stream) learnedEstimate(est accounting.Estimate) accounting.Estimate {
	l := st.s.learned
	if l == nil || st.req.OutputCap <= 0 || st.req.Background {
		return est
	}
	key, ok := l.key(st.target.api.Name(), accounting.ModelFamily(st.req.Model), st.attrs)
	if !ok {
		return est
	}
	st.learnKey, st.learning = key, true
	per, use := l.reserve(st.learnKey, st.req.OutputCap)
	l.requests[use].Inc()
	if use == useLearned {
		r := st.req
		r.OutputCap = per
		est = r.Estimate()
	}
	l.capTokens.Add(float64(st.req.Estimate().OutputTokens))
	l.reserved.Add(float64(est.OutputTokens))
	return est
}

// learn feeds the settled request's output per choice to its estimate,
// when it was settled on the provider's final usage report, and counts
// what the output exceeded its reservation by.
func (st *stream) learn(usage accounting.Usage, basis Basis, final bool) {
	l := st.s.learned
	if !st.learning || basis != BasisUsage || !final {
		return
	}
	out := accounting.ClampTokens(usage.OutputTokens)
	if r := st.res; r != nil && out > r.Estimate.OutputTokens {
		l.overshoot.Add(float64(out - r.Estimate.OutputTokens))
	}
	choices := max(st.req.Choices, 1)
	per := out / choices
	if out%choices != 0 {
		per++
	}
	l.est.Observe(st.learnKey, per)
}
