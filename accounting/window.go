package accounting

import (
	"math"
	"time"
)

// The functions here are the window arithmetic every Store shares. Times
// are microseconds since the Unix epoch: the resolution of Redis's TIME,
// and exact in a float64 (what Lua computes with) until the year 2255.

// FixedWindowAt returns the index of the fixed window holding now (µs) and
// the time (µs) at which it ends.
//
// A calendar window in a time zone ([Counter.Zoned]) is indexed by its
// start (µs), a UTC calendar day likewise.
func FixedWindowAt(c *Counter, now int64) (index, end int64) {
	if c.Zoned() || c.Calendar == CalendarDay {
		return calendarWindow(c.Calendar, c.location(), now)
	}
	if c.Calendar == CalendarMonth {
		t := time.UnixMicro(now).UTC()
		y, m, _ := t.Date()
		index = int64(y)*12 + int64(m) - 1
		end = time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		return index, end
	}
	w := c.Window.Microseconds()
	index = now / w
	return index, (index + 1) * w
}

// SlotLength returns the length (µs) of one of a sliding window's
// [SlidingSlots] slots.
func SlotLength(c *Counter) int64 {
	return c.Window.Microseconds() / SlidingSlots
}

// Micros converts a duration in microseconds to a [time.Duration]; a
// negative one (a time already past) is zero.
func Micros(us int64) time.Duration {
	if us <= 0 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

// BucketFullIn returns how long (µs) a token bucket holding tokens takes to
// be full again: it refills Limit per Window, in float arithmetic that
// every Store computes the same way, to the last bit.
func BucketFullIn(c *Counter, tokens float64) int64 {
	missing := float64(c.Capacity()) - tokens
	if missing <= 0 {
		return 0
	}
	return int64(math.Ceil(missing / BucketRate(c)))
}

// BucketRate is a token bucket's refill in units per µs.
func BucketRate(c *Counter) float64 {
	return float64(c.Limit) / float64(c.Window.Microseconds())
}
