package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// zones collects the boundaries of a call's calendar windows in a time
// zone. Lua in Redis knows no time zones, and the store's clock must
// decide the window (replicas sharing a store agree on windows whatever
// their clocks say), so Go computes, by its own clock, the boundaries of
// the windows before, at and after now ([accounting.ZoneBounds]), and
// the function picks the one holding Redis's time: the same window
// memstore computes, as long as the clocks differ by less than a window
// (a day). They go in ARGV[3], four doubles per zoned item; the item's
// period says which four.
type zones struct {
	s   *Store
	now int64
	b   []byte
	n   int64
}

// add appends c's boundaries and returns its number, from 1.
func (z *zones) add(c *accounting.Counter) int64 {
	if z.n == 0 {
		z.now = z.s.clockEstimate()
	}
	z.n++
	for _, v := range accounting.ZoneBounds(c, z.now) {
		z.b = appendNum(z.b, v)
	}
	return z.n
}

// call calls *fn with the clock, the items and, when there are zoned
// items, their boundaries: a call without any passes two arguments, as
// before time zones.
func (s *Store) call(ctx context.Context, fn *string, keys []string, items []byte, z *zones) *redis.Cmd {
	if z.n == 0 {
		return s.fcall(ctx, fn, keys, s.clock(), items)
	}
	return s.fcall(ctx, fn, keys, s.clock(), items, z.b)
}

// clockEstimate is this replica's idea of the store's clock (µs): its
// own, moved as the package's tests move the store's.
func (s *Store) clockEstimate() int64 {
	if f := s.frozen.Load(); f != 0 {
		return f + s.skew.Load()
	}
	return time.Now().UnixMicro() + s.offset.Load() + s.skew.Load()
}
