package accounting

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrNoPrice is returned when a cost limit applies to a model that has no
// price and there is no default price. [Options.Validate] makes it
// impossible; a reservation never guesses a cost of zero.
var ErrNoPrice = errors.New("accounting: no price for model")

// Defaults of [Options].
const (
	// DefaultSettleRetry is how long a failed settlement or release is
	// retried when Options.SettleRetry is zero.
	DefaultSettleRetry = 2 * time.Minute
	// DefaultMaxPendingSettlements bounds the settlements and releases
	// retrying at once when Options.MaxPendingSettlements is zero.
	DefaultMaxPendingSettlements = 10000
)

// Options configure a Limiter. Only Store is required; the zero value of
// every other field is its default.
//
// The Limiter sets no timeout of its own on a store call: the Store
// bounds each call itself (see [Store]), since it is the one that knows
// what a call costs on its network.
type Options struct {
	Store  Store
	Limits []Limit
	Prices Prices
	// SettleRetry is how long a settlement that failed on the store, or
	// the release of a reservation whose answer was lost, is retried in
	// the background before it is given up; zero means
	// DefaultSettleRetry, and it may not exceed MaxSettleRetry.
	SettleRetry time.Duration
	// MaxPendingSettlements bounds the settlements and releases retrying
	// at once; zero means DefaultMaxPendingSettlements.
	MaxPendingSettlements int
	// MaxWaiting bounds the requests waiting for capacity at once
	// ([Limiter.ReserveWaiting]), and MaxWaitingPerKey those waiting on
	// one limit's counter for one scope; zero means DefaultMaxWaiting
	// and DefaultMaxWaitingPerKey. A request over either bound is
	// refused at once, as without a wait.
	MaxWaiting       int
	MaxWaitingPerKey int
	Logger           *slog.Logger
	// Registerer receives the Limiter's metrics; nil means none.
	Registerer prometheus.Registerer
	// Regional keeps the limits marked AcrossRegions (see [Regional]);
	// it is required when one is.
	Regional Regional
	// Now is the replica's clock, which times a reservation until its
	// settlement (a provider's 429 blocks its limits for a time counted
	// from the reservation, see [ProviderState]); nil means time.Now.
	Now func() time.Time
}

// Validate reports every problem of the limits and prices, joined, each a
// [FieldError] named by its config key: a limit's own (limits[2].window,
// see [Limit.Validate]), two limits of one name, a cost limit that meets
// a model without a price, a price that is not one
// (models.gpt-4o.input). It does not look at Store, Logger or
// Registerer, so that a loader can check a file before it builds a
// store; [New] calls it.
func (o *Options) Validate() error {
	var errs []error
	first := make(map[string]int, len(o.Limits))
	for i := range o.Limits {
		l := &o.Limits[i]
		field := fmt.Sprintf("limits[%d]", i)
		errs = append(errs, PrefixFields(field, l.Validate()))
		if j, seen := first[l.Name]; seen && l.Name != "" {
			errs = append(errs, FieldErrorf(field+".name", "%q is also the name of limits[%d]", l.Name, j))
		} else {
			first[l.Name] = i
		}
		if l.Dimension == Cost {
			// A limit matched to one model (the "model" attribute every
			// request carries) needs that model's price or the default;
			// any other may meet every model.
			model, one := l.Match["model"]
			_, hasDefault := o.Prices[DefaultModel]
			if _, ok := o.Prices.Lookup(model); !ok || (!one && !hasDefault) {
				what := "every model"
				if one {
					what = strconv.Quote(model)
				}
				errs = append(errs, FieldErrorf(field, "a cost limit needs a price under models for %s (or a default entry)", what))
			}
		}
	}
	errs = append(errs, validateDowngrades(o.Limits)...)
	for _, model := range slices.Sorted(maps.Keys(o.Prices)) {
		p := o.Prices[model]
		errs = append(errs, validPriceKey(model), PrefixFields("models."+model, p.Validate()))
	}
	return errors.Join(errs...)
}

// Limiter applies a set of limits, reserving on and settling against a
// Store. It is safe for concurrent use.
type Limiter struct {
	store       Store
	limits      []Limit
	prices      Prices
	settleRetry time.Duration
	log         *slog.Logger
	m           *metrics
	values      *limitValues
	regional    Regional
	now         func() time.Time
	// shadowLogs rate-limits each shadow limit's log lines.
	shadowLogs map[string]*shadowLog

	// background is shared with the Limiters made from this one by
	// [Limiter.Reconfigure].
	*background
}

// background is what a Limiter shares with those reconfigured from it:
// reservation IDs, and the settlements and releases retrying.
type background struct {
	idPrefix string
	idSeq    atomic.Uint64

	retrySlots chan struct{}
	retries    sync.WaitGroup
	closing    chan struct{}
	closeOnce  sync.Once

	// waits are the requests waiting for capacity, shared so that a
	// reload bounds and orders them with those already waiting.
	waits *waitQueue
}

// New returns a Limiter. It fails without a store, or if
// [Options.Validate] finds a problem.
func New(opts Options) (*Limiter, error) {
	if opts.Store == nil {
		return nil, errors.New("accounting: no store")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("accounting: invalid options: %w", err)
	}
	if err := opts.validateRegional(); err != nil {
		return nil, err
	}
	pending := opts.MaxPendingSettlements
	if pending <= 0 {
		pending = DefaultMaxPendingSettlements
	}
	bg := &background{
		closing:    make(chan struct{}),
		retrySlots: make(chan struct{}, pending),
		waits:      newWaitQueue(opts.MaxWaiting, opts.MaxWaitingPerKey),
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	bg.idPrefix = hex.EncodeToString(b[:]) + "-"
	return newLimiter(opts, newMetrics(opts.Registerer), bg), nil
}

// newLimiter returns a Limiter of opts, which are valid, on m and bg:
// New's own, or those a Limiter shares with the ones reconfigured from
// it.
func newLimiter(opts Options, m *metrics, bg *background) *Limiter {
	l := &Limiter{
		store:       opts.Store,
		limits:      byFamily(opts.Limits),
		prices:      opts.Prices,
		settleRetry: opts.SettleRetry,
		log:         opts.Logger,
		m:           m,
		background:  bg,
		regional:    opts.Regional,
		now:         opts.Now,
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.shadowLogs = newShadowLogs(l.limits)
	if l.settleRetry <= 0 {
		l.settleRetry = DefaultSettleRetry
	}
	l.settleRetry = min(l.settleRetry, MaxSettleRetry)
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.values = newLimitValues(m.limitValues, l.log, l.limits)
	return l
}

// byFamily returns limits with each model a Match names replaced by its
// family ([ModelFamily]), as the requests' model attribute carries it: a
// limit matched to a snapshot holds its whole family (the broader
// reading is the one a caller cannot walk around). The caller's limits
// are left as they are.
func byFamily(limits []Limit) []Limit {
	out := slices.Clone(limits)
	for i := range out {
		want, ok := out[i].Match[AttributeModel]
		if !ok || ModelFamily(want) == want {
			continue
		}
		m := maps.Clone(out[i].Match)
		m[AttributeModel] = ModelFamily(want)
		out[i].Match = m
	}
	return out
}

// Limits returns the limits the Limiter applies.
func (l *Limiter) Limits() []Limit { return l.limits }

// Store returns the Limiter's store.
func (l *Limiter) Store() Store { return l.store }

// Request is what a reservation needs to know about a request.
type Request struct {
	// Attributes are the identity attributes, plus "model" and "api".
	Attributes Attributes
	// Model prices the cost dimension.
	Model string
	// PriceFactor scales the model's price for this request (a provider's
	// priority tier bills more than its standard one); zero means 1.
	PriceFactor float64
	Estimate    Estimate
	// RequestsOnly restricts the reservation to limits on the requests
	// and concurrent dimensions, for calls that are not LLM API calls (their cost is not
	// known, and a token limit in debt must not block them).
	RequestsOnly bool
}

// Decision is the outcome of a reservation.
type Decision struct {
	Admitted bool
	// Trip describes the limit named in the rejection when not Admitted.
	Trip Trip
	// Dims holds, per dimension, the figures for the x-ratelimit-*
	// headers: from the applicable limit with the least remaining after
	// this reservation (ties: the soonest reset).
	Dims [numDimensions]DimState
	// FailedOpen reports an admission without reservation: the store
	// failed and every applicable limit allows that.
	FailedOpen bool
	// ShadowRejected lists the shadow limits that would have rejected
	// an admitted request (see [Mode]); nil when none would.
	ShadowRejected []*Limit
	// Wait reports how a request held for capacity fared
	// ([Limiter.ReserveWaiting]); zero for one that was not held.
	Wait Wait
}

// Trip describes why a request was rejected.
type Trip struct {
	Limit *Limit
	// Requested is the amount the request asked of the limit.
	Requested int64
	// Remaining and Reset describe the limit's counter before the request.
	Remaining int64
	Reset     time.Duration
	// RetryAfter is when to ask again: when enough frees up, or, when
	// Settling, at most [InFlightRetryAfter]; zero if NeverFits or Final.
	RetryAfter time.Duration
	// FreesAfter is when enough frees up with the reservations in
	// flight charged in full, as the store says: RetryAfter unless
	// Settling; zero for a lifetime budget, which never frees on its
	// own.
	FreesAfter time.Duration
	// Settling reports a shortfall that reservations still in flight
	// hold (see settling.go): as they settle, what they do not use
	// returns, and the request may fit.
	Settling bool
	// InFlight is what reservations in flight hold of the limit's
	// counter ([CounterState.InFlight]).
	InFlight int64
	// NeverFits reports a request larger than the limit's capacity.
	NeverFits bool
	// Final reports a refusal by a [Lifetime] limit that nothing in
	// flight can undo: the budget is for the scope's whole life, so the
	// same request will never fit.
	Final bool
	// Expired reports, with Final, that the scope's wall-clock cap has
	// passed.
	Expired bool
	// Key is the store key of Limit's counter for the request's scope:
	// requests that wait for capacity queue by it.
	Key string
	// Wait is how long the request may wait for capacity to return
	// ([OnExhausted.WaitUpTo]); zero when it may not (see waitFor).
	Wait time.Duration
}

// DimState is one dimension's rate-limit figures.
type DimState struct {
	Applied   bool
	Limit     int64
	Remaining int64
	Reset     time.Duration
	// Window is the limit's window (a token bucket's refill period; 31
	// days for a calendar month), for headers that state the policy.
	Window time.Duration
}

type reservedItem struct {
	limit   *Limit
	counter Counter
	amount  int64
	mark    int64
	// epoch is the counter's CounterState.Epoch, passed back at
	// settlement.
	epoch int64
	// held is the share of the limit kept from this request for a
	// privileged tier (see ReserveFor).
	held int64
	// remaining is what the counter had left after the reservation,
	// which a provider's figures correct (see ProviderState), and reset
	// its Reset then, which dates a provider's block (see
	// providerBlock).
	remaining int64
	reset     time.Duration
}

// Reservation is an admitted request's hold on its limits. Settle it
// exactly once; further calls are no-ops.
type Reservation struct {
	Decision
	// ID identifies the reservation in the store.
	ID       string
	Model    string
	Estimate Estimate
	// Cost is the estimate's cost in micro-dollars, when a price exists.
	Cost int64
	// PriceFactor is the request's, kept to price its settlement alike.
	PriceFactor float64

	l *Limiter
	// price is the model's price at PriceFactor, when hasPrice: found
	// once, for the reservation and its settlement.
	price    Price
	hasPrice bool
	items    []reservedItem
	// settleItems is room for the settlement's items.
	settleItems []SettleItem
	// heldBack: refused only by what a limit keeps for a privileged
	// tier (see [ReserveFor]).
	heldBack bool
	// at is when the store answered the reservation, on the Limiter's
	// clock: for the logs, and to date a provider's block.
	at      time.Time
	settled atomic.Bool
}

// Reserve decides whether req may spend its estimate and, if so, reserves
// it on every applicable limit. A rejection is a Reservation with
// Admitted false, not an error. The error is ErrStoreUnavailable (wrapped)
// when the store failed and a fail-closed limit applies, or ErrNoPrice.
//
// A store call that fails may still have been applied: a timeout can
// strike after the store charged the reservation. Unless the store is
// sure it changed nothing ([ErrNotApplied]), Reserve then releases the
// reservation in the background ([Store.Release], retried like a failed
// settlement), whether the request is refused or admitted under fail-open
// limits. Such a reservation holds capacity until the release lands: its
// first attempt runs 50ms after the failure, later ones back off to 5s
// apart, for Options.SettleRetry ([DefaultSettleRetry]); so when the store
// answers again within that time, at most the outage plus 5s. Past it
// (or when the retry queue is full), the release is given up, logged and
// counted, and the reservation stays charged until its window lets it go
// — the safe direction.
func (l *Limiter) Reserve(ctx context.Context, req Request) (*Reservation, error) {
	r, err := l.reserve(ctx, req)
	if err == nil && !r.Admitted {
		l.countRefusal(r)
	}
	return r, err
}

// reserve is Reserve without counting a rejection: a request that waits
// for capacity is refused by each attempt but the last, and a refusal
// that a downgrade turns into an admission is no rejection (see
// [Limiter.ReserveOrDowngrade]).
func (l *Limiter) reserve(ctx context.Context, req Request) (*Reservation, error) {
	r, err := l.reserveOnce(ctx, req, true)
	if errors.Is(err, errLeaseGrown) {
		// Once: the region's cap grew, or moved to the store's window.
		r, err = l.reserveOnce(ctx, req, false)
		if errors.Is(err, errLeaseGrown) {
			// The window turned again between the two (released).
			err = fmt.Errorf("%w: the window turned while a limit kept across regions was reserved", ErrStoreUnavailable)
		}
	}
	return r, err
}

// reserveOnce is one attempt of reserve; when grow, one that a limit
// kept across regions refused may end in errLeaseGrown (see leaseShort).
func (l *Limiter) reserveOnce(ctx context.Context, req Request, grow bool) (*Reservation, error) {
	price, hasPrice := l.prices.Lookup(req.Model)
	price = price.Scale(req.PriceFactor)
	var cost int64
	if hasPrice {
		cost = price.EstimateCost(req.Estimate)
	}
	// The limits that apply, collected here first: the reservation is
	// then allocated once, with room for as many items (see
	// newReservation).
	var buf [8]reservedItem
	kept := buf[:0]
	failClosed := false
	for i := range l.limits {
		lim := &l.limits[i]
		if !lim.Applies(req.Attributes) || (req.RequestsOnly && lim.Dimension != Requests && lim.Dimension != Concurrent) {
			continue
		}
		if lim.From != nil {
			lim = l.values.forRequest(lim, req.Attributes)
		}
		var held int64
		lim, held = forTier(lim, req.Attributes)
		var amount int64
		switch lim.Dimension {
		case Requests, Concurrent:
			amount = 1
		case Tokens:
			amount = req.Estimate.Total()
		case Cost:
			if !hasPrice {
				return nil, fmt.Errorf("%w %q (limit %q)", ErrNoPrice, req.Model, lim.Name)
			}
			amount = cost
		}
		kept = append(kept, reservedItem{limit: lim, amount: amount, held: held})
		// A shadow limit never fails a request, the store's failure
		// included.
		failClosed = failClosed || (lim.OnStoreError == FailClosed && lim.Mode != Shadow)
	}
	r, space := newReservation(len(kept))
	var endBuf [8]int
	ends := endBuf[:0]
	if len(kept) > len(endBuf) {
		ends = make([]int, len(kept))
	}
	ends = ends[:len(kept)]
	keys, idEnd := reservationKeys(l.idPrefix, l.idSeq.Add(1), kept, req.Attributes, ends)
	r.ID, r.Model, r.Estimate, r.Cost, r.PriceFactor = keys[:idEnd], req.Model, req.Estimate, cost, req.PriceFactor
	r.l, r.price, r.hasPrice = l, price, hasPrice
	if len(kept) == 0 {
		r.Admitted = true
		return r, nil
	}
	items := space.items
	start := idEnd
	for i := range kept {
		lim := kept[i].limit
		items = append(items, ReserveItem{Counter: lim.counter(keys[start:ends[i]]), Amount: kept[i].amount, Optional: lim.Mode == Shadow})
		start = ends[i]
	}
	r.items, r.settleItems = append(space.kept, kept...), space.settle

	caps := l.leaseCaps(items, r.items)
	// The caller's context as it is: the store bounds the call.
	res, err := l.store.Reserve(ctx, ReserveRequest{ID: r.ID, Items: items})
	r.at = l.now()
	if err != nil {
		if ctx.Err() == nil {
			// A caller that left (the client hung up, Envoy ended the
			// stream) ends its own call: that is no failure of the
			// store, and an alert on store errors must not fire on
			// clients that hang up. The release below still runs.
			l.m.storeErrors.WithLabelValues("reserve").Inc()
			l.shadowStoreErrors(r.items)
		}
		if errors.Is(err, ErrStoreUnavailable) && !errors.Is(err, ErrNotApplied) {
			l.releaseLater(ReserveRequest{ID: r.ID, Items: items})
		}
		if failClosed {
			if !errors.Is(err, ErrStoreUnavailable) {
				err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
			}
			return nil, err
		}
		l.log.Warn("store unavailable; admitting under fail-open limits", "err", err)
		r.Admitted, r.FailedOpen, r.items = true, true, nil
		return r, nil
	}
	if len(res.States) != len(items) {
		return nil, fmt.Errorf("%w: store answered %d states for %d items", ErrStoreUnavailable, len(res.States), len(items))
	}
	if caps != nil {
		if l.leaseShort(ctx, ReserveRequest{ID: r.ID, Items: items}, res, caps, grow) {
			return nil, errLeaseGrown
		}
		leaseStates(items, res.States, caps)
	}
	r.Admitted = res.Admitted
	for i := range r.items {
		r.items[i].counter = items[i].Counter
		r.items[i].mark = res.States[i].Mark
		r.items[i].epoch = res.States[i].Epoch
		r.items[i].remaining = res.States[i].Remaining
		r.items[i].reset = res.States[i].Reset
	}
	if r.Admitted {
		states := res.States
		if l.shadowLogs != nil {
			states = l.shadowDecisions(ctx, r, states)
		}
		for i, st := range states {
			d := r.items[i].limit.Dimension
			if d == Concurrent {
				// A lease held, a shadow limit's included: settlement
				// returns every lease left in r.items.
				l.m.leases.WithLabelValues(r.items[i].limit.Name).Inc()
			}
			if r.items[i].limit.Mode == Shadow {
				// Never in the headers: the client sees the limits
				// that bind it.
				continue
			}
			r.Dims[d] = tighter(r.Dims[d], r.items[i].limit, st)
		}
		return r, nil
	}
	trip, ok := pickTrip(r.items, res.States)
	if !ok {
		return nil, fmt.Errorf("%w: store rejected a request without a limit that did not fit", ErrStoreUnavailable)
	}
	r.Trip = trip
	r.Dims[r.Trip.Limit.Dimension] = DimState{
		Applied: true, Limit: r.Trip.Limit.Capacity(), Remaining: r.Trip.Remaining, Reset: r.Trip.Reset,
		Window: r.Trip.Limit.policyWindow(),
	}
	r.heldBack = heldBack(r.items, r.Trip)
	r.items = nil
	return r, nil
}

// tighter returns whichever of cur and (lim, st) has the least remaining,
// ties going to the sooner reset.
func tighter(cur DimState, lim *Limit, st CounterState) DimState {
	next := DimState{Applied: true, Limit: lim.Capacity(), Remaining: st.Remaining, Reset: st.Reset, Window: lim.policyWindow()}
	if !cur.Applied || next.Remaining < cur.Remaining ||
		(next.Remaining == cur.Remaining && next.Reset < cur.Reset) {
		return next
	}
	return cur
}

// pickTrip names the limit that frees last among those that did not fit:
// one the request can never fit first (too large for it, or a lifetime
// budget nothing in flight can undo), else the largest RetryAfter.
func pickTrip(items []reservedItem, states []CounterState) (Trip, bool) {
	var best Trip
	found := false
	for i, st := range states {
		if st.Fits || items[i].limit.Mode == Shadow {
			continue
		}
		if t := tripOf(&items[i], st); !found || t.namedOver(&best) {
			best, found = t, true
		}
	}
	if !found {
		return Trip{}, false
	}
	best.Wait = waitFor(items, states)
	return best, true
}

// tripOf describes the refusal of item it, whose counter is in state st.
func tripOf(it *reservedItem, st CounterState) Trip {
	t := Trip{
		Limit:      it.limit,
		Requested:  it.amount,
		Remaining:  st.Remaining,
		Reset:      st.Reset,
		RetryAfter: st.RetryAfter,
		FreesAfter: st.RetryAfter,
		InFlight:   st.InFlight,
		NeverFits:  st.NeverFits,
		Expired:    st.Expired,
		Key:        it.counter.Key,
	}
	if settling(it.limit, it.amount, st) {
		t.Settling = true
		t.RetryAfter = InFlightRetryAfter
		if st.RetryAfter > 0 {
			t.RetryAfter = min(st.RetryAfter, InFlightRetryAfter)
		}
	}
	t.Final = it.limit.Algorithm == Lifetime && !t.Settling
	return t
}

// never reports a refusal that no wait ends.
func (t *Trip) never() bool { return t.NeverFits || t.Final }

// namedOver reports whether a rejection names t rather than u: the one
// no wait ends, else the one that frees later.
func (t *Trip) namedOver(u *Trip) bool {
	if t.never() != u.never() {
		return t.never()
	}
	return t.RetryAfter > u.RetryAfter
}
