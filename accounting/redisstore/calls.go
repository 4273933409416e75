package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// RecordKeyPrefix starts the key of a reservation's record (or a
// release's tombstone), followed by the reservation ID.
const RecordKeyPrefix = accounting.KeyPrefix + "r:"

// maxExact bounds every integer sent to the functions: Lua numbers are
// doubles, exact up to 2^53 (9e15 tokens, or 9e9 USD in micro-dollars).
const maxExact = 1 << 53

// The algorithm codes of library.lua.
const (
	codeFixed    = 0
	codeMonth    = 1
	codeSliding  = 2
	codeBucket   = 3
	codeLeases   = 4
	codeLifetime = 5
	// codeZoned is a calendar window in a time zone (or a UTC calendar
	// day): its period is its number among the call's zoned items, whose
	// boundaries the call passes in ARGV[3] (see zones).
	codeZoned = 6
	// codeOptional is added to an optional item's code: every code is
	// below it.
	codeOptional = 8
)

// skippedLevel is SKIPPED of library.lua: the level tw_reserve answers
// for an optional item it did not charge.
const skippedLevel = -(1 << 60)

// The functions take their items as one string of little-endian doubles
// (Redis parses one argument instead of five per item, and Lua converts no
// text to numbers), and tw_reserve answers the same way.
const (
	counterNums  = 4 // per counter: algorithm code, limit, capacity, period
	rejectedNums = 8 // per item in tw_reserve's answer to a rejection
)

// appendNum appends v as a little-endian double.
func appendNum(b []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v)))
}

// appendCounter appends the algorithm code, limit, capacity and period
// (µs: the window, or a sliding window's slot) that the functions take for
// c.
func appendCounter(b []byte, c *accounting.Counter, z *zones) ([]byte, error) {
	var code, period int64
	switch c.Algorithm {
	case accounting.FixedWindow:
		code, period = codeFixed, c.Window.Microseconds()
		switch {
		case c.Zoned() || c.Calendar == accounting.CalendarDay:
			code, period = codeZoned, z.add(c)
		case c.Calendar == accounting.CalendarMonth:
			code, period = codeMonth, 1
		}
	case accounting.SlidingWindow:
		code, period = codeSliding, accounting.SlotLength(c)
	case accounting.TokenBucket:
		code, period = codeBucket, c.Window.Microseconds()
	case accounting.Leases:
		// The period is the lease.
		code, period = codeLeases, c.Window.Microseconds()
	case accounting.Lifetime:
		// The period is the run's wall-clock cap.
		code, period = codeLifetime, c.Window.Microseconds()
	default:
		return nil, fmt.Errorf("redisstore: counter %q: unknown algorithm %v", c.Key, c.Algorithm)
	}
	if period <= 0 {
		return nil, fmt.Errorf("redisstore: counter %q: window %v is too short", c.Key, c.Window)
	}
	limit, capacity := c.Limit, c.Capacity()
	if err := exact(c.Key, limit, capacity); err != nil {
		return nil, err
	}
	b = appendNum(b, code)
	b = appendNum(b, limit)
	b = appendNum(b, capacity)
	return appendNum(b, period), nil
}

// exact reports an error for numbers a Lua double could not hold exactly.
func exact(key string, vals ...int64) error {
	for _, v := range vals {
		if v > maxExact || v < -maxExact {
			return fmt.Errorf("redisstore: counter %q: %d is out of range (|x| <= 2^53)", key, v)
		}
	}
	return nil
}

// clock is the functions' first argument: "0" (Redis's TIME) in
// production; in the package's tests an offset or a frozen time. It is
// returned as an argument, ready for go-redis: a constant in an interface
// costs no allocation, a string made at run time does.
func (s *Store) clock() any {
	if !s.general.Load() {
		if f := s.frozen.Load(); f != 0 {
			return "@" + strconv.FormatInt(f, 10)
		}
		if o := s.offset.Load(); o != 0 {
			return strconv.FormatInt(o, 10)
		}
		return "0"
	}
	// "~": the calls take no fast path.
	if f := s.frozen.Load(); f != 0 {
		return "~@" + strconv.FormatInt(f, 10)
	}
	return "~" + strconv.FormatInt(s.offset.Load(), 10)
}

// recordKey is the Redis key of reservation id's record.
func (s *Store) recordKey(id string) string { return s.prefix + RecordKeyPrefix + id }

// reserveArgs returns the keys (the items' counters, then the record
// key, record), the packed items of req and the zoned items' boundaries,
// for tw_reserve and tw_release alike.
func (s *Store) reserveArgs(req *accounting.ReserveRequest, record string) ([]string, []byte, zones, error) {
	n := len(req.Items)
	keys := make([]string, n+1)
	items := make([]byte, 0, 8*(counterNums+1)*n)
	z := zones{s: s}
	var err error
	for i := range req.Items {
		it := &req.Items[i]
		keys[i] = s.RedisKey(it.Key)
		at := len(items)
		if items, err = appendCounter(items, &it.Counter, &z); err != nil {
			return nil, nil, zones{}, err
		}
		if it.Optional {
			code := numf(string(items[at:at+8]), 0)
			binary.LittleEndian.PutUint64(items[at:], math.Float64bits(code+codeOptional))
		}
		if err := exact(it.Key, it.Amount); err != nil {
			return nil, nil, zones{}, err
		}
		items = appendNum(items, it.Amount)
	}
	keys[n] = record
	return keys, items, z, nil
}

// Reserve implements [accounting.Store] with one call of tw_reserve.
func (s *Store) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	n := len(req.Items)
	if n == 0 {
		// Nothing to check, settle or release: the same answer memstore
		// gives, without a record.
		return accounting.ReserveResult{Admitted: true, States: []accounting.CounterState{}}, nil
	}
	if s.shardBy != "" {
		return s.reserveSharded(ctx, req)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.reserveOnce(ctx, &req, s.recordKey(req.ID))
}

// reserveOnce is one call of tw_reserve for req, its record under key
// record, within ctx.
func (s *Store) reserveOnce(ctx context.Context, req *accounting.ReserveRequest, record string) (accounting.ReserveResult, error) {
	n := len(req.Items)
	keys, items, z, err := s.reserveArgs(req, record)
	if err != nil {
		return accounting.ReserveResult{}, err
	}
	reply, err := s.call(ctx, &lib.reserve, keys, items, &z).Text()
	if err != nil {
		return accounting.ReserveResult{}, unavailable(err)
	}
	res := accounting.ReserveResult{States: make([]accounting.CounterState, n)}
	switch {
	case len(reply) == 8 && num(reply, 0) == -1:
		return accounting.ReserveResult{}, accounting.ErrReleased
	case len(reply) >= 8*2 && (num(reply, 0) == 1 || num(reply, 0) == 2 || num(reply, 0) == 5 || num(reply, 0) == 6):
		if err := admittedStates(reply, req.Items, res.States); err != nil {
			return accounting.ReserveResult{}, unavailable(err)
		}
		res.Admitted = true
	case len(reply) == 8*(1+rejectedNums*n) && num(reply, 0) == 0:
		for i := range res.States {
			res.States[i] = rejectedState(&req.Items[i].Counter, reply, 1+rejectedNums*i)
		}
	default:
		return accounting.ReserveResult{}, unavailable(fmt.Errorf("tw_reserve answered %d bytes for %d items", len(reply), n))
	}
	return res, nil
}

// admittedStates fills states from tw_reserve's answer to an admission
// (see reserve in functions.lua):
//
//	code (1, or 2: some optional items were not charged; plus 4: the
//	borns follow), the store's time,
//	a level per item (skippedLevel: an optional item not charged),
//	what each item's counter holds in flight,
//	each item's counter's born (its epoch), with code 5 or 6 only,
//	a run start per lifetime item (0 for one not charged),
//	rejectedNums per optional item not charged
func admittedStates(reply string, items []accounting.ReserveItem, states []accounting.CounterState) error {
	n := len(items)
	bad := func() error {
		return fmt.Errorf("tw_reserve answered %d bytes, code %d, for %d items", len(reply), num(reply, 0), n)
	}
	code := num(reply, 0)
	start := 2 + 2*n // the next lifetime item's run start
	borns := code > 4
	if borns {
		code -= 4
		start += n
	}
	o := start + lifetimes(items) // the next uncharged item's state
	if len(reply) < 8*o {
		return bad()
	}
	now := num(reply, 1)
	for i := range items {
		c := &items[i].Counter
		level := numf(reply, 2+i)
		var run int64
		if c.Algorithm == accounting.Lifetime {
			run = num(reply, start)
			start++
		}
		switch {
		case level == skippedLevel:
			if !items[i].Optional || code != 2 || len(reply) < 8*(o+rejectedNums) {
				return bad()
			}
			states[i] = rejectedState(c, reply, o)
			o += rejectedNums
		case c.Algorithm == accounting.Lifetime:
			states[i] = admittedLifetime(c, level, run, now)
		default:
			states[i] = admitted(c, level, now)
		}
		if level != skippedLevel {
			states[i].InFlight = inFlight(c, num(reply, 2+n+i), states[i].Remaining)
			if borns {
				states[i].Epoch = num(reply, 2+2*n+i)
			}
		}
	}
	if len(reply) != 8*o {
		return bad()
	}
	return nil
}

// rejectedState reads the state of an item that did not fit from
// tw_reserve's answer, its six doubles starting at the o-th.
func rejectedState(c *accounting.Counter, reply string, o int) accounting.CounterState {
	st := accounting.CounterState{
		Remaining:  num(reply, o),
		Reset:      accounting.Micros(num(reply, o+1)),
		Fits:       num(reply, o+2) == 1,
		RetryAfter: accounting.Micros(num(reply, o+3)),
		NeverFits:  num(reply, o+4) == 1,
		Expired:    num(reply, o+4) == 2,
		Mark:       num(reply, o+5),
	}
	st.InFlight = inFlight(c, num(reply, o+6), st.Remaining)
	st.Epoch = num(reply, o+7)
	return st
}

// inFlight is [accounting.CounterState.InFlight] of counter c, whose
// pieces that count hold held, with remaining left: at most its usage.
func inFlight(c *accounting.Counter, held, remaining int64) int64 {
	return max(0, min(held, c.Capacity()-remaining))
}

// admitted is the state of counter c after an admitted reservation, from
// what tw_reserve answers: its level after the charge (the used amount,
// or a bucket's tokens) and the store's time (µs). It is what memstore's
// commit reports, from the same arithmetic.
func admitted(c *accounting.Counter, level float64, now int64) accounting.CounterState {
	st := accounting.CounterState{Fits: true}
	switch c.Algorithm {
	case accounting.TokenBucket:
		st.Remaining = int64(math.Floor(level))
		st.Reset = accounting.Micros(accounting.BucketFullIn(c, level))
	case accounting.Leases:
		st.Remaining = c.Limit - int64(level)
	case accounting.SlidingWindow:
		slot := accounting.SlotLength(c)
		cur := now / slot
		st.Remaining = c.Limit - int64(level)
		st.Reset = accounting.Micros((cur+accounting.SlidingSlots+1)*slot - now)
		st.Mark = cur
	default:
		idx, end := accounting.FixedWindowAt(c, now)
		st.Remaining = c.Limit - int64(level)
		st.Reset = accounting.Micros(end - now)
		st.Mark = idx
	}
	return st
}

// numf reads the i-th little-endian double of b.
func numf(b string, i int) float64 {
	var u uint64
	for j := 8*i + 7; j >= 8*i; j-- {
		u = u<<8 | uint64(b[j])
	}
	return math.Float64frombits(u)
}

// num reads the i-th little-endian double of b as an integer.
func num(b string, i int) int64 { return int64(numf(b, i)) }

// Settle implements [accounting.Store] with one call of tw_settle, which
// applies the corrections only if the reservation's record exists and
// deletes it in the same atomic step: a settlement retried after an
// ambiguous failure (it did land, the answer was lost) finds no record
// and is a no-op.
func (s *Store) Settle(ctx context.Context, req accounting.SettleRequest) error {
	if s.shardBy != "" {
		return s.settleSharded(ctx, req)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.settleOnce(ctx, &req, s.recordKey(req.ID))
}

// settleOnce is one call of tw_settle for req, its record under key
// record, within ctx.
func (s *Store) settleOnce(ctx context.Context, req *accounting.SettleRequest, record string) error {
	keys := make([]string, 0, len(req.Items)+1)
	items := make([]byte, 0, 8*(counterNums+4)*len(req.Items))
	z := zones{s: s}
	var err error
	for i := range req.Items {
		it := &req.Items[i]
		// Every item goes, a settlement equal to its estimate too: what
		// the reservation held in flight comes out of its counter.
		delta := it.Actual - it.Reserved
		if it.Algorithm == accounting.Leases {
			// A settlement returns the lease, whatever the amounts.
			delta = -1
		}
		if err := exact(it.Key, it.Reserved, it.Actual, delta, it.Mark, it.Epoch); err != nil {
			return err
		}
		keys = append(keys, s.RedisKey(it.Key))
		if items, err = appendCounter(items, &it.Counter, &z); err != nil {
			return err
		}
		items = appendNum(items, delta)
		items = appendNum(items, it.Mark)
		items = appendNum(items, it.Reserved)
		items = appendNum(items, it.Epoch)
	}
	keys = append(keys, record)
	applied, err := s.call(ctx, &lib.settle, keys, items, &z).Int64()
	if err != nil {
		return unavailable(err)
	}
	if applied == 0 {
		return accounting.ErrNoReservation
	}
	return nil
}

// Release implements [accounting.Store] with one call of tw_release.
func (s *Store) Release(ctx context.Context, req accounting.ReserveRequest) (bool, error) {
	if s.shardBy != "" {
		return s.releaseSharded(ctx, req)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.releaseOnce(ctx, &req, s.recordKey(req.ID))
}

// releaseOnce is one call of tw_release for req, its record under key
// record, within ctx.
func (s *Store) releaseOnce(ctx context.Context, req *accounting.ReserveRequest, record string) (bool, error) {
	keys, items, z, err := s.reserveArgs(req, record)
	if err != nil {
		return false, err
	}
	released, err := s.call(ctx, &lib.release, keys, items, &z).Int64()
	if err != nil {
		return false, unavailable(err)
	}
	return released == 1, nil
}

// lifetimes counts the lifetime items among items: tw_reserve's answer
// to an admission carries the start of each one's run.
func lifetimes(items []accounting.ReserveItem) int {
	k := 0
	for i := range items {
		if items[i].Algorithm == accounting.Lifetime {
			k++
		}
	}
	return k
}

// admittedLifetime is the state of lifetime counter c after an admitted
// reservation: its level after the charge, the run's start and the
// store's time (µs), as memstore's commit reports it.
func admittedLifetime(c *accounting.Counter, level float64, start, now int64) accounting.CounterState {
	end, _ := accounting.LifetimeEnd(c, start)
	return accounting.CounterState{
		Fits:      true,
		Remaining: c.Limit - int64(level),
		Reset:     accounting.Micros(end - now),
		Mark:      start,
	}
}
