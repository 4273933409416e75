package regions

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrLedgerUnavailable is returned (wrapped) when the ledger could not be
// reached or did not answer in time. A region then admits only within
// the lease it holds, until that lapses.
var ErrLedgerUnavailable = errors.New("regions: ledger unavailable")

// The ledger's two operations, each one script on one key: ledger.lua
// holds what both share.
var (
	//go:embed ledger.lua
	ledgerLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed report.lua
	reportLua string

	acquireScript = redis.NewScript(ledgerLua + acquireLua)
	reportScript  = redis.NewScript(ledgerLua + reportLua)
)

// LedgerKeyPrefix starts every key the ledger writes.
const LedgerKeyPrefix = "twl1:"

// DefaultLedgerTimeout bounds a ledger call when [LedgerOptions.Timeout]
// is zero: the ledger is usually in another region, a round trip away.
const DefaultLedgerTimeout = 2 * time.Second

// LedgerOptions configure a [Ledger]. The zero value of every field is
// its default.
type LedgerOptions struct {
	// Timeout bounds each call, whatever the context allows; zero means
	// DefaultLedgerTimeout.
	Timeout time.Duration
	// Now, when set, is the ledger's clock, passed to Redis with every
	// call; nil means Redis's own (TIME), the one clock every region
	// then agrees on. Tests set it.
	Now func() time.Time
}

// Ledger is the global record of who holds what of each global limit,
// kept in one Redis that every region reaches (the global Redis). Only
// leases touch it: a region's requests are decided on its own store.
//
// It is safe for concurrent use, by any number of replicas in any number
// of regions.
type Ledger struct {
	rdb     redis.Scripter
	timeout time.Duration
	now     func() time.Time
}

// NewLedger returns a Ledger on rdb (a go-redis client of the global
// Redis). The client should not retry commands on its own: a grant
// retried after it landed is granted twice (the region then simply
// holds more of the budget than it asked for, never more than is free).
func NewLedger(rdb redis.Scripter, opts LedgerOptions) *Ledger {
	l := &Ledger{rdb: rdb, timeout: opts.Timeout, now: opts.Now}
	if l.timeout <= 0 {
		l.timeout = DefaultLedgerTimeout
	}
	return l
}

// Window names one window of one global counter in the ledger.
type Window struct {
	// Key is the counter's store key (every region keys it alike).
	Key string
	// Mark is the window, as the regional store marks it
	// ([accounting.CounterState.Mark]).
	Mark int64
	// Limit is the global limit for the window.
	Limit int64
	// Lapse is how long after the calling region's last contact the
	// ledger reclaims its lease: its lease TTL plus the grace. Each
	// region's own is kept, so regions configured apart never cut each
	// other's leases short.
	Lapse time.Duration
	// Expire is how long the ledger keeps the window's record after the
	// last call: past the window's end.
	Expire time.Duration
	// Incarnation is the calling region's id for the window, as its
	// store holds it (every replica of the region reads the same). The
	// ledger counts grants per incarnation; a call with another id than
	// the region's last writes off what the last one held (see the
	// package doc).
	Incarnation int64
}

// Holding is a region's standing in the ledger after a call.
type Holding struct {
	// Granted is all the ledger has granted the region in the window.
	Granted int64
	// Released is what the region returned or had reclaimed: it may
	// spend at most Granted - Released in all.
	Released int64
	// Reclaimed is what this call took back from lapsed leases (any
	// region's).
	Reclaimed int64
	// Superseded reports that the call came from another incarnation of
	// the region than the last call did: the region's store forgot its
	// counters, or two regions share its name. WrittenOff is then what
	// the superseded incarnation held, now never granted again in the
	// window.
	Superseded bool
	WrittenOff int64
}

// Acquire asks for want more of w's limit for region (its incarnation
// w.Incarnation) and renews the region's lease. It returns what was
// granted (between 0 and want: what is free) and the incarnation's
// holding.
func (l *Ledger) Acquire(ctx context.Context, region string, w Window, want int64) (int64, Holding, error) {
	v, err := l.run(ctx, acquireScript, region, w, strconv.FormatInt(want, 10))
	if err != nil {
		return 0, Holding{}, err
	}
	return v[0], Holding{Granted: v[1], Released: v[2], Reclaimed: v[3], Superseded: v[4] >= 0, WrittenOff: max(v[4], 0)}, nil
}

// Report records that region has used used of w in all, and returned
// returned (which it has already made unspendable to itself), and renews
// its lease. The holding's Released may exceed returned: the ledger
// reclaimed the lease while the region was out of touch, and the region
// must make the difference unspendable too.
func (l *Ledger) Report(ctx context.Context, region string, w Window, used, returned int64) (Holding, error) {
	v, err := l.run(ctx, reportScript, region, w, strconv.FormatInt(used, 10), strconv.FormatInt(returned, 10))
	if err != nil {
		return Holding{}, err
	}
	return Holding{Granted: v[0], Released: v[1], Reclaimed: v[3], Superseded: v[4] >= 0, WrittenOff: max(v[4], 0)}, nil
}

// run calls script on w's key with the common arguments and args, and
// returns its five integers.
func (l *Ledger) run(ctx context.Context, script *redis.Script, region string, w Window, args ...any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	now := ""
	if l.now != nil {
		now = strconv.FormatInt(l.now().UnixMicro(), 10)
	}
	expire := max(int64(w.Expire/time.Second), 1)
	argv := append([]any{
		region,
		strconv.FormatInt(w.Limit, 10),
		strconv.FormatInt(w.Lapse.Microseconds(), 10),
		strconv.FormatInt(expire, 10),
		now,
		strconv.FormatInt(w.Incarnation, 10),
	}, args...)
	key := LedgerKeyPrefix + w.Key + ":" + strconv.FormatInt(w.Mark, 10)
	v, err := script.Run(ctx, l.rdb, []string{key}, argv...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLedgerUnavailable, err)
	}
	if len(v) != 5 {
		return nil, fmt.Errorf("%w: ledger answered %d values, want 5", ErrLedgerUnavailable, len(v))
	}
	return v, nil
}
