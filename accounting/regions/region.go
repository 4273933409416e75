package regions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Defaults of [Options].
const (
	// DefaultChunk is the share of a limit a region acquires at once.
	DefaultChunk = 0.05
	// DefaultLeaseTTL is how long a region spends on its lease after it
	// last reached the ledger.
	DefaultLeaseTTL = 30 * time.Second
	// DefaultGrace is how much longer the ledger waits before it gives
	// a silent region's lease to the others.
	DefaultGrace = 10 * time.Second
	// DefaultSyncInterval is how often a region reports its use.
	DefaultSyncInterval = 5 * time.Second
	// DefaultAcquireTimeout bounds a request's wait for more lease: a
	// read of the region's store, a round trip to the ledger (another
	// region, often 100-300ms away) and the recording of the grant (a
	// few store calls). A ledger farther away than the bound leaves the
	// acquiring to the sync loop.
	DefaultAcquireTimeout = time.Second
	// DefaultRetryAfter is how long after a failed ledger call requests
	// stop asking the ledger themselves (the sync loop still does).
	DefaultRetryAfter = time.Second
)

// MaxCounters bounds the counters a Region keeps leases on: one per
// limit kept across regions (they take no scope), so a config holds far
// fewer.
const MaxCounters = 1024

// unlimited is the limit the Region's own bookkeeping reserves under: it
// charges counters that must take the charge (2^53, the last integer a
// double holds exactly, which Redis's counters are).
const unlimited = 1 << 53

// noMark is the window of a cap not yet known.
const noMark = math.MinInt64

// Options configure a [Region]. Name, Store and Ledger are required; the
// zero value of every other field is its default.
type Options struct {
	// Name names the region in the ledger: 1-64 letters, digits, '_',
	// '.' or '-'. Every replica of one region has the same.
	Name string
	// Store is the region's own store, the one its Limiters reserve on.
	Store accounting.Store
	// Ledger is the global ledger every region shares.
	Ledger *Ledger
	// Chunk is the share of a limit the region acquires at once, in
	// (0, 1]; zero means DefaultChunk. When more than three chunks are
	// unused, the region gives back all but two.
	Chunk float64
	// LeaseTTL is how long the region spends on its lease after it last
	// reached the ledger (by its own clock); zero means DefaultLeaseTTL.
	// It must exceed SyncInterval, or a healthy region's lease lapses
	// between syncs.
	LeaseTTL time.Duration
	// Grace is how much longer than LeaseTTL the ledger waits, on its
	// own clock, before it gives a silent region's lease to the others:
	// it must cover the difference between the two clocks' rates and a
	// ledger call's time in flight. Zero means DefaultGrace.
	Grace time.Duration
	// SyncInterval is how often [Region.Run] reports use and renews the
	// lease; zero means DefaultSyncInterval.
	SyncInterval time.Duration
	// AcquireTimeout bounds how long a request that did not fit waits for
	// the region to acquire more: a store read, a round trip to the
	// ledger and a few store calls to record the grant, so it must
	// exceed the round trip to the ledger. Zero means
	// DefaultAcquireTimeout.
	AcquireTimeout time.Duration
	// RetryAfter is how long after a failed ledger call requests do not
	// call it again themselves; zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// Now is the region's clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Metrics, when set, counts what the region leases (see
	// [NewMetrics]).
	Metrics *Metrics
}

// Validate reports every problem of the options, joined, each an
// [accounting.FieldError] named by its key under regions in
// tokenwarden's config file. It does not look at Store, Ledger, Now,
// Logger or Metrics, so that a loader can check a file before it
// connects to anything; [New] calls it.
func (o *Options) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, accounting.FieldErrorf(field, format, args...))
	}
	if !validName(o.Name) {
		bad("name", "%q must be 1-64 letters, digits, '_', '.' or '-'", o.Name)
	}
	if o.Chunk < 0 || o.Chunk > 1 || math.IsNaN(o.Chunk) {
		bad("lease_chunk", "%v is outside (0, 1]", o.Chunk)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"lease_ttl", o.LeaseTTL}, {"grace", o.Grace}, {"sync_interval", o.SyncInterval}, {"acquire_timeout", o.AcquireTimeout}, {"retry_after", o.RetryAfter}} {
		if d.v < 0 {
			bad(d.field, "must not be negative")
		}
	}
	if cmpDefault(o.LeaseTTL, DefaultLeaseTTL) <= cmpDefault(o.SyncInterval, DefaultSyncInterval) {
		bad("lease_ttl", "%s must exceed sync_interval (%s)", cmpDefault(o.LeaseTTL, DefaultLeaseTTL), cmpDefault(o.SyncInterval, DefaultSyncInterval))
	}
	return errors.Join(errs...)
}

func cmpDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Region is one region's share of the limits kept across regions, as one
// replica sees it: it implements [accounting.Regional] for the replica's
// Limiter. All the region's state is in its store, so every replica of
// the region agrees on what the region holds; a replica keeps only a
// copy of the caps, and when it last reached the ledger.
type Region struct {
	name   string
	store  accounting.Store
	ledger *Ledger
	chunk  float64
	ttl    time.Duration
	lapse  time.Duration
	every  time.Duration
	wait   time.Duration
	retry  time.Duration
	now    func() time.Time
	log    *slog.Logger
	m      *Metrics

	idPrefix string
	idSeq    atomic.Uint64

	mu       sync.Mutex
	counters map[string]*leased
	// keep holds the keys of the counters of the limits in force, as
	// [Region.Retain] last set them; nil keeps every counter.
	keep map[string]bool
}

var _ accounting.Regional = (*Region)(nil)

// leased is a counter the region holds a lease on.
type leased struct {
	// turn, held by one at a time, serialises what changes the region's
	// holding of the counter (acquiring, reporting, returning); a
	// request waits for it no longer than its own bound.
	turn chan struct{}
	key  string             // c.Key, read without the turn
	c    accounting.Counter // guarded by turn; its Limit is the global limit
	// view is the cap requests reserve under.
	view atomic.Pointer[capView]
	// failed is when a ledger call last failed, and dry when the ledger
	// last had less free than a request asked (UnixNano; 0 if never):
	// for Options.RetryAfter, requests do not ask it again.
	failed, dry atomic.Int64
}

// take waits for lc's turn until ctx ends, and reports whether it got it.
func (lc *leased) take(ctx context.Context) bool {
	select {
	case lc.turn <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (lc *leased) done() { <-lc.turn }

// recently reports whether t (UnixNano, 0 for never) is within d before
// now.
func recently(t int64, now time.Time, d time.Duration) bool {
	return t != 0 && now.Sub(time.Unix(0, t)) < d
}

// capView is a replica's copy of a region's cap.
type capView struct {
	cap, mark int64
	// until is when the lease lapses unless renewed, by the region's
	// clock: the start of the last ledger call that answered, plus the
	// lease TTL.
	until time.Time
}

// New returns a Region. Call [Region.Run] to keep its leases.
func New(opts Options) (*Region, error) {
	if opts.Store == nil || opts.Ledger == nil {
		return nil, errors.New("regions: a region needs a store and a ledger")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("regions: invalid options: %w", err)
	}
	r := &Region{
		name:     opts.Name,
		store:    opts.Store,
		ledger:   opts.Ledger,
		chunk:    opts.Chunk,
		ttl:      cmpDefault(opts.LeaseTTL, DefaultLeaseTTL),
		every:    cmpDefault(opts.SyncInterval, DefaultSyncInterval),
		wait:     cmpDefault(opts.AcquireTimeout, DefaultAcquireTimeout),
		retry:    cmpDefault(opts.RetryAfter, DefaultRetryAfter),
		now:      opts.Now,
		log:      opts.Logger,
		m:        opts.Metrics,
		counters: make(map[string]*leased),
	}
	r.lapse = r.ttl + cmpDefault(opts.Grace, DefaultGrace)
	if r.chunk == 0 {
		r.chunk = DefaultChunk
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	r.idPrefix = "rg-" + r.name + "-" + hex.EncodeToString(b[:]) + "-"
	return r, nil
}

// Name returns the region's name.
func (r *Region) Name() string { return r.name }

// Cap implements [accounting.Regional]: the region's cap on c as this
// replica last saw it, or 0 when its lease has lapsed (a region out of
// touch with the ledger stops spending before the ledger gives its lease
// away).
func (r *Region) Cap(c *accounting.Counter) (capacity, mark int64) {
	lc := r.counter(c)
	if lc == nil {
		return 0, noMark
	}
	v := lc.view.Load()
	if v == nil {
		return 0, noMark
	}
	if !r.now().Before(v.until) {
		return 0, v.mark
	}
	return v.cap, v.mark
}

// counter returns the region's state of c, made on first use; nil past
// MaxCounters.
func (r *Region) counter(c *accounting.Counter) *leased {
	r.mu.Lock()
	defer r.mu.Unlock()
	lc, ok := r.counters[c.Key]
	if !ok {
		if len(r.counters) >= MaxCounters {
			return nil
		}
		lc = &leased{key: c.Key, c: *c, turn: make(chan struct{}, 1)}
		r.counters[c.Key] = lc
	}
	return lc
}

// Grow implements [accounting.Regional]: when the region has less than
// amount left of its cap on c, it acquires the larger of a chunk and what
// is missing, within Options.AcquireTimeout. For Options.RetryAfter after
// a ledger call failed, or the ledger had too little free, requests do
// not ask it again (the sync loop still does): a ledger that is down or
// a budget that is spent must not cost every request a round trip to
// another region. Those marks are of the cap's window: when the store
// has moved on (mark, the window it refused or charged amount in, is
// not the cap's), the region first learns the new window's cap from its
// store, and forgets that the last window's budget was spent.
func (r *Region) Grow(ctx context.Context, c *accounting.Counter, amount, mark int64) bool {
	lc := r.counter(c)
	if lc == nil {
		return false
	}
	now := r.now()
	v := lc.view.Load()
	turned := v == nil || v.mark != mark
	if !turned && (recently(lc.failed.Load(), now, r.retry) || recently(lc.dry.Load(), now, r.retry)) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	if !lc.take(ctx) {
		return false
	}
	defer lc.done()
	lc.c = *c // the latest config's limit
	now = r.now()
	s, err := r.snapshot(ctx, &lc.c)
	if err != nil {
		return false
	}
	if v := lc.view.Load(); v != nil && v.mark != s.mark {
		// The window turned: its cap is what the region's store says
		// was granted in it (by any replica), on the lease this replica
		// holds; the last window's dry ledger says nothing of this one.
		lc.view.Store(&capView{cap: s.granted, mark: s.mark, until: v.until})
		lc.dry.Store(0)
	}
	if v := lc.view.Load(); v != nil && v.mark == s.mark && now.Before(v.until) {
		// Another replica, or the request before this one, may have
		// acquired meanwhile.
		lc.view.Store(&capView{cap: max(v.cap, s.granted), mark: s.mark, until: v.until})
		if s.granted-s.used >= amount {
			return true
		}
	}
	if recently(lc.failed.Load(), now, r.retry) || recently(lc.dry.Load(), now, r.retry) {
		return false
	}
	left, err := r.acquire(ctx, lc, s, max(r.chunkOf(&lc.c), amount-(s.granted-s.used)), now)
	if err != nil {
		return false
	}
	if left < amount {
		lc.dry.Store(now.UnixNano())
		return false
	}
	return true
}

// chunkOf is the amount the region acquires at once on c.
func (r *Region) chunkOf(c *accounting.Counter) int64 {
	return max(1, int64(float64(c.Limit)*r.chunk))
}

// acquire asks the ledger for want more of c in the window of s, and
// applies the answer; it returns what the region has left of its cap.
func (r *Region) acquire(ctx context.Context, lc *leased, s snapshot, want int64, sent time.Time) (int64, error) {
	got, h, err := r.ledger.Acquire(ctx, r.name, r.window(&lc.c, s), want)
	if err != nil {
		r.ledgerFailed(lc, "acquire", sent, err)
		return 0, err
	}
	r.m.grantedAdd(lc.c.Key, got)
	r.m.reclaimed(h.Reclaimed)
	return r.apply(ctx, lc, &s, h, sent)
}

// ledgerFailed records a failed ledger call.
func (r *Region) ledgerFailed(lc *leased, op string, at time.Time, err error) {
	lc.failed.Store(at.UnixNano())
	r.m.ledgerError(op)
	r.log.Warn("ledger call failed; the region spends only what it holds until its lease lapses",
		"region", r.name, "op", op, "counter", lc.c.Key, "err", err)
}

// apply brings the region's store in line with holding h in the window
// of s (granted raised to h.Granted, returned to h.Released) and renews
// the replica's lease from sent, the start of the call that answered h.
// It returns what the region has left of its cap.
func (r *Region) apply(ctx context.Context, lc *leased, s *snapshot, h Holding, sent time.Time) (int64, error) {
	if h.Superseded {
		r.m.writtenOffAdd(lc.c.Key, h.WrittenOff)
		r.log.Error("another incarnation of the region called the ledger last in this window: "+
			"the region's store forgot its counters (a restart without persistence, a flush, a failover), "+
			"or two regions share this name; the ledger wrote off what the other incarnation held",
			"region", r.name, "counter", lc.c.Key, "incarnation", s.incarnation, "written_off", h.WrittenOff)
	}
	if err := r.raise(ctx, &lc.c, s.mark, grantsKey, h.Granted, nil); err != nil {
		return 0, err
	}
	burn := h.Released - s.returned
	if burn > 0 {
		// The ledger reclaimed what the region did not report while out
		// of touch: make it unspendable here too.
		if err := r.raise(ctx, &lc.c, s.mark, returnsKey, h.Released, &lc.c); err != nil {
			return 0, err
		}
		r.log.Warn("the ledger reclaimed part of the region's lease while it was out of touch",
			"region", r.name, "counter", lc.c.Key, "amount", burn)
		s.used += burn
		s.returned += burn
	}
	s.granted = max(s.granted, h.Granted)
	lc.failed.Store(0)
	lc.view.Store(&capView{cap: h.Granted, mark: s.mark, until: sent.Add(r.ttl)})
	r.m.setUnspent(r.name, lc.c.Key, h.Granted-s.used)
	return h.Granted - s.used, nil
}

// window is c's window of s in the ledger, called by s's incarnation.
func (r *Region) window(c *accounting.Counter, s snapshot) Window {
	var length time.Duration
	switch c.Calendar {
	case accounting.CalendarMonth:
		length = 31 * 24 * time.Hour
	case accounting.CalendarDay:
		length = 25 * time.Hour
	default:
		length = c.Window
	}
	return Window{Key: c.Key, Mark: s.mark, Limit: c.Limit, Lapse: r.lapse, Expire: length + r.lapse + time.Hour, Incarnation: s.incarnation}
}
