package accounting

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNotInspectable is returned by the Limiter's read side ([Limiter.Usage]
// and the rest) when its Store does not implement [Inspector].
var ErrNotInspectable = errors.New("accounting: the store cannot show its counters")

// Inspector is the read side of a [Store], for operators: what a counter
// holds now, starting a counter afresh, and the heaviest counters of a
// limit. A Store implements it optionally; memstore and redisstore do,
// and the storetest package's RunInspect holds them to one behaviour.
//
// Nothing here runs on the request path: the Limiter calls it only from
// its own read-side methods.
type Inspector interface {
	// Peek returns each counter's state as of now on the store's clock,
	// in order, charging nothing and creating nothing: the state a
	// Reserve of nothing would report, so that a Peek right after a
	// Reserve agrees with what the Reserve answered. A counter the
	// store does not hold is full.
	Peek(ctx context.Context, counters []Counter) ([]CounterUsage, error)
	// ResetCounter starts counter c afresh, so that it is full again,
	// and reports whether it held any usage (as Peek reads it).
	// Reservations made before
	// the reset, in flight or held, change nothing on it when they
	// settle or are released: the store keeps the reset's epoch
	// ([CounterState.Epoch]) for [ResetKept] (on Redis, under the
	// counter's key), and a reservation made in the same instant as the
	// reset but after it counts as made after.
	ResetCounter(ctx context.Context, c Counter) (bool, error)
	// Top returns the counters whose keys start with req.Prefix that
	// hold the most usage now (Used > 0 only), most first, ties by key;
	// at most req.N of them. It examines at most req.MaxScan entries of
	// the store (not only those of the limit: a store's scan walks its
	// whole keyspace), and says whether it saw them all.
	Top(ctx context.Context, req TopRequest) (TopResult, error)
}

// CounterUsage is one counter's state, in the unit of its limit's
// dimension. Used + Remaining is always the counter's capacity.
type CounterUsage struct {
	// Used is what counts against the counter now: the current window's
	// usage (a sliding window's last Window), or what a token bucket
	// lacks of full, rounded up.
	Used int64
	// Remaining is what a reservation could take now. It is negative
	// when a settlement charged more than was left.
	Remaining int64
	// Reset is how long until the counter is back to full capacity, if
	// nothing more is charged (for a fixed window, its end).
	Reset time.Duration
}

// NewCounterUsage returns the usage of counter c whose state a
// reservation of nothing reports as remaining and reset.
func NewCounterUsage(c *Counter, remaining int64, reset time.Duration) CounterUsage {
	return CounterUsage{Used: c.Capacity() - remaining, Remaining: remaining, Reset: reset}
}

// TopRequest asks [Inspector.Top] for the heaviest counters of a limit.
type TopRequest struct {
	// Prefix is the limit's [CounterPrefix]: every counter key of the
	// limit starts with it.
	Prefix string
	// Counter is how the limit's counters count; its Key is ignored.
	Counter Counter
	// N is how many counters to return at most.
	N int
	// MaxScan bounds the store entries examined.
	MaxScan int
}

// TopResult is [Inspector.Top]'s answer.
type TopResult struct {
	Counters []TopCounter
	// Scanned is how many of the limit's counters were read.
	Scanned int
	// Complete reports that the scan saw every entry of the store: when
	// false, a heavier counter may have been missed.
	Complete bool
}

// TopCounter is one counter in a [TopResult].
type TopCounter struct {
	Key string
	CounterUsage
}

// CounterPrefix returns what every counter key of limit l starts with:
// its algorithm, window and name, each field length-prefixed as in
// [CounterKey], so that no other limit's key starts with it. (A global
// limit's one key is the prefix itself.)
func CounterPrefix(l *Limit) string {
	return CounterKey(&Limit{Name: l.Name, Algorithm: l.Algorithm, Window: l.Window, Calendar: l.Calendar}, nil)
}

// ScopeValues reads the scope values out of a counter key of limit l, in
// the order of l.Scope. It reports false for a key that is not one of
// l's counters as l is now configured (one written when the limit had
// another scope, say).
func ScopeValues(l *Limit, key string) (Attributes, bool) {
	rest, ok := strings.CutPrefix(key, CounterPrefix(l))
	if !ok {
		return nil, false
	}
	attrs := make(Attributes, 0, len(l.Scope))
	for _, name := range l.Scope {
		var got, v string
		if got, rest, ok = readField(rest); !ok || got != name {
			return nil, false
		}
		if v, rest, ok = readField(rest); !ok {
			return nil, false
		}
		attrs = append(attrs, Attribute{Name: name, Value: v})
	}
	return attrs, rest == ""
}

// readField reads one "len:value" field off the front of s.
func readField(s string) (field, rest string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || i > 19 {
		return "", "", false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n < 0 || n > len(s)-i-1 || strconv.Itoa(n) != s[:i] {
		return "", "", false
	}
	return s[i+1 : i+1+n], s[i+1+n:], true
}

// SortTop puts counters in the order [Inspector.Top] returns them: most
// used first, ties by key.
func SortTop(counters []TopCounter) {
	slices.SortFunc(counters, func(a, b TopCounter) int {
		if c := cmp.Compare(b.Used, a.Used); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}
