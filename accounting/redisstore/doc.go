// Package redisstore is an [accounting.Store] on Redis, so that N
// tokenwarden replicas enforce one limit, not N (config: store.type: redis).
//
// # One script per decision
//
// A reservation is one EVALSHA of reserve.lua: it reads every counter the
// request touches, checks them all, and charges all of them or none, in one
// atomic step (Redis runs one script at a time). A settlement is one
// EVALSHA of settle.lua, which first checks and sets the reservation's
// settled marker (tw1:settled:<id>, kept for [accounting.SettledTTL]) in
// the same atomic step as the corrections: a repeated or retried settle is
// a no-op, also after an ambiguous failure where the first attempt landed
// but its answer was lost. The scripts are embedded from .lua files and
// share counter.lua, a line-by-line port of memstore's arithmetic (fixed
// windows incl. calendar months, sliding windows of SlidingSlots+1 slots,
// token buckets with float tokens), so a limit behaves the same on both
// stores; a test drives both through thousands of random steps on one
// clock and compares every answer. When Redis does not know a script
// (after a restart or SCRIPT FLUSH) go-redis falls back to EVAL once.
//
// # Time
//
// Time comes from Redis: the scripts read TIME (µs) and never the
// replica's clock, so replicas whose clocks disagree still agree on every
// window, reset and Retry-After. Redis 5 and later replicate a script by
// its effects, so reading TIME before writing is safe on replicas and in
// the AOF; tokenwarden needs Redis >= 5 (it is tested on 7.0).
//
// # Keys and memory
//
// A counter lives under its [accounting.CounterKey] (already unambiguous
// for any attribute bytes) as a small hash: a fixed window {w: window
// index, u: used}; a token bucket {t: tokens as %.17g, at: µs of the last
// refill}; a sliding window {slot index: amount} for at most SlidingSlots+1
// slots. Each key gets a PEXPIRE for exactly as long as its state matters
// (memstore's expiry: the end of the window, the last slot leaving the
// window, the bucket being full again), so Redis memory tracks active
// callers. The scripts also decide staleness from the state itself, so a
// key that outlives its state (the expiry rounds up to a millisecond) is
// read as fresh, as in memstore. Measured with MEMORY USAGE on Redis
// 7.0 for a 58-byte key: about 136 bytes per fixed window, calendar month,
// token bucket or one-slot sliding window counter, 248 bytes for a sliding
// window holding all 11 slots, and 104 bytes per settled marker.
//
// # Failures
//
// Every call is bounded by [Options.Timeout] (config store.redis.timeout),
// including waiting for a pooled connection and dialling one, and every
// failure is returned wrapped in [accounting.ErrStoreUnavailable], so that
// the Limiter applies each limit's on_store_error. go-redis reconnects by
// itself when Redis comes back; the Store needs no restart. The client
// does not retry a command: a Reserve retried after it ran would charge
// twice. A Reserve that times out after reaching Redis may still have been
// charged; the Limiter treats it as failed and never settles it, so that
// estimate stays charged until its window passes (the safe direction).
//
// # Redis Cluster
//
// A script may only touch keys of one hash slot. Counter keys carry no
// hash tag of their own (and scope values may contain braces), so the keys
// of one request generally hash to different slots and Redis Cluster
// refuses the script (CROSSSLOT). [Options.HashTag] puts every key in the
// slot of "{HashTag}": the store then works on a cluster
// ([Options.ClusterAddrs] requires the tag), but all of tokenwarden's
// keys live on one shard, which scales memory and load no further than a
// single Redis. A tag chosen per request (say, the tenant) would spread
// the keys, but it is only sound when every limit is scoped by that
// attribute: a global or per-model counter would otherwise exist once per
// tag and stop being one limit. For failover without a cluster, use
// Sentinel ([Options.SentinelMasterName]).
//
// # Eviction
//
// Every key has a TTL, so a Redis whose maxmemory-policy evicts (any
// policy but noeviction, the volatile-* ones included) deletes counters
// when it is full, and a deleted counter is a budget forgotten: an
// exhausted limit admits a whole new budget. [Store.CheckEviction] reads
// the policy of every server the Store writes to (INFO memory, which
// managed services allow where CONFIG is disabled) and returns
// [ErrEvictionPolicy] unless all of them have noeviction; tokenwarden
// refuses to start on it and reports it in /readyz. Under noeviction a
// full Redis refuses writes instead, which the Store reports as
// [accounting.ErrStoreUnavailable].
package redisstore
