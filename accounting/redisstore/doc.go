// Package redisstore is an [accounting.Store] on Redis, so that N
// tokenwarden replicas enforce one limit, not N (config: store.type: redis).
//
// An embedder builds one with [New] from [Options] (the config package
// reads them from the store.redis section of a file), or with
// [NewFromClient] on a go-redis client of its own, and passes it to
// accounting.New as Options.Store.
//
// # One function call per decision
//
// The Store's calls are the functions of one Redis function library
// (library.lua, counters.lua and functions.lua, loaded with FUNCTION LOAD;
// Redis 7.0 or later). A reservation is one FCALL of tw_reserve: it reads
// every counter the request touches, checks them all, and charges all of
// them or none, in one atomic step (Redis runs one function at a time). A
// settlement is one FCALL of tw_settle, a release one of tw_release; the
// operators' read side ([Store.Peek], [Store.Top]) calls tw_peek, which
// writes nothing, and [Store.ResetCounter] tw_reset, which writes the
// counter afresh with the reset's epoch ([accounting.CounterState.Epoch]). The Lua is a port of memstore's arithmetic (fixed
// windows incl. calendar months, sliding windows of SlidingSlots+1 slots,
// token buckets with float tokens; a time zone's days and months picked
// from boundaries the Go side computes, since Lua knows no zones), so a
// limit behaves the same on both stores; a test drives both through
// thousands of random steps on one clock and compares every answer.
//
// A library, unlike an EVAL script, defines its helper functions once,
// when it is loaded, rather than on every call, and the code is written
// for what Redis spends its time on: each call passes its items as one
// string of packed doubles, reads the counters with one MGET, overwrites
// each with one SETRANGE, which keeps its expiry while it stands, and
// stores counters as packed doubles. A reservation on counters that
// exist runs one command per counter besides TIME, the MGET and its
// record's SET (a settlement: GETDEL; TestCommandsPerCall counts them),
// and costs Redis 1.16 to 1.36 times the instructions of a minimal
// all-or-nothing script on as many keys (GET, compare, INCRBY and
// PEXPIRE per key); a settlement 1.04 to 1.23 times
// (BenchmarkScriptInstructions, Redis 7.0; BenchmarkScriptCost times the
// same calls). The library is
// named after a hash of its code, so that replicas of different versions
// sharing a Redis load theirs side by side (old versions' libraries stay
// loaded until FUNCTION DELETE). When Redis does not have the library
// (after a restart without persistence, FUNCTION FLUSH, or a failover to
// a server that never had it) the Store loads it and calls again.
//
// # Time
//
// Time comes from Redis: the functions read TIME (µs) and never the
// replica's clock, so replicas whose clocks disagree still agree on every
// window, reset and Retry-After. Redis replicates a function by its
// effects, so reading TIME before writing is safe on replicas and in the
// AOF.
//
// # Records: settled once, released when lost
//
// An admitted reservation writes a record under [RecordKeyPrefix] and its
// ID: one double, its time, counting until [accounting.RecordExpiry]. The
// settlement applies only if the record exists and deletes it in the same
// step, so a repeated or retried settlement is a no-op
// ([accounting.ErrNoReservation]), also after an ambiguous failure where
// the first attempt landed but its answer was lost. A Reserve that times
// out may still have been applied; the Limiter then calls [Store.Release],
// which refunds the reservation if its record exists, or else leaves a
// tombstone (the same key, as long) so that the Reserve charges
// nothing should it arrive later ([accounting.ErrReleased]). A record
// costs memory only while its request is in flight: about 90 bytes
// (MEMORY USAGE, Redis 7.0, for a Limiter's ID), 170 bytes of
// used_memory with the key's entries in Redis's tables. A settled
// reservation leaves nothing behind: the settlement deletes its record,
// whose absence is what makes a second settlement a no-op.
//
// A hold ([accounting.Holder]) is a record that counts for the hold's
// TTL rather than RecordTTL: tw_hold writes it dated TTL − RecordTTL
// ahead (in every slot of its counters on the sharded layout), so that
// tw_settle settles it once as it settles any record. Its data is a key
// of its own under [HoldKeyPrefix], written with SET NX and taken with
// GETDEL.
//
// # Keys and memory
//
// A counter lives under its [accounting.CounterKey] (already unambiguous
// for any attribute bytes) as a string of packed doubles (library.lua
// spells them out): 16 bytes for a fixed window, 24 for a token bucket,
// 24 to 104 for a sliding window's slots, and for what reservations in
// flight hold ([accounting.CounterState.InFlight]) 8 bytes and 16 per
// piece (one per record grain the counter was charged in while its
// reservations' records count, or for a sliding window per slot and
// grain: usually one to three). Each key expires when its state stops
// mattering (memstore's expiry: the end of the window, the last slot
// leaving the window, the bucket being full again, the last one a tenth
// of the bucket's period later, so that a busy bucket moves its expiry
// once per tenth of its capacity rather than on every charge, and no
// sooner than its pieces stop counting), so Redis memory tracks active
// callers. The functions also decide staleness from the state itself, so
// a key that outlives its state (the expiry rounds up to a millisecond)
// is read as fresh, as in memstore. Measured with MEMORY USAGE on Redis
// 7.0 for a 63-byte key charged by a reservation in flight: 152 to 184
// bytes per fixed window, calendar month, token bucket or one-slot
// sliding window counter, 440 bytes for a sliding window holding all 11
// slots with a reservation in flight in each (TestMemoryPerKey).
//
// # Calls that share a round trip
//
// On a single server (or a Sentinel-monitored master), calls made while
// another is on its way to Redis wait for it and then go together, as one
// pipeline; a call made while none is on its way goes at once, alone. A
// round trip costs a replica more in system calls than in Go, so under
// load this is most of what the Redis store costs beyond the memory store
// (BENCHMARKS.md, "The Redis store's client side"). Redis still runs each
// FCALL atomically and on its own; nothing is sent twice; a call whose
// context ends while it waits is never sent and wraps
// [accounting.ErrNotApplied]. A cluster client sends every call alone:
// go-redis splits a cluster pipeline by node and may send its commands
// again after a broken connection.
//
// # Failures
//
// Every call is bounded by [Options.Timeout] (config store.redis.timeout),
// including waiting for a pooled connection and dialling one. It is the
// only bound on a store call: the Limiter passes its caller's context
// through (a settlement's is never cancelled), because the Store is the
// layer that knows its network and configures the client's own timeouts
// to match. Every failure is returned wrapped in
// [accounting.ErrStoreUnavailable], so that the Limiter applies each
// limit's on_store_error; a failure that certainly changed nothing (no
// connection could be had, the call was never sent, or Redis answered
// with an error) also wraps
// [accounting.ErrNotApplied], which spares the release. go-redis reconnects by itself when Redis comes
// back; the Store needs no restart. The client does not retry a command:
// a Reserve retried after it ran would charge twice.
//
// # Redis Cluster
//
// A function may only touch keys of one hash slot. Counter keys carry no
// hash tag of their own (and scope values may contain braces), so the keys
// of one request generally hash to different slots and Redis Cluster
// refuses the call (CROSSSLOT). A Store on a cluster ([Options.ClusterAddrs])
// needs one of two layouts.
//
// [Options.HashTag] puts every key, records included, in the slot of
// "{HashTag}": one call per decision, but all of tokenwarden's keys live
// on one shard, which scales memory and load no further than a single
// Redis.
//
// [Options.ShardBy] (config store.redis.shard_by, an identity attribute
// such as "tenant") spreads them. Each Redis key is a hash tag and the
// counter key, "{tag}tw2:…" ([Store.RedisKey]); the tag is 8 hex digits
// of a hash of the ShardBy attribute's value for a counter whose limit is
// scoped by it ([accounting.KeyScopeValue] reads it from the key), and of
// the whole key for any other counter. So one principal's limits share a
// slot and reserve in one atomic call, while global, per-model and
// per-user counters spread over the slots too. The tag comes first and
// holds no brace, so no scope value can choose a key's slot; two values
// that hash alike only share a slot, their keys staying apart
// (CounterKey's fields are length-prefixed). The tag is computed from the
// key alone, so [Store.Peek], [Store.ResetCounter] and the keys
// [Store.Top] finds need nothing else.
//
// A request whose counters fall in several slots is decided in steps,
// one FCALL of tw_reserve per slot (slots computed here, with Redis's
// CRC16): the principal's slot first, then the others by slot number.
// Each step writes its own record, in its slot, under a key named after
// the slot, so that settlement and release find it from any subset of
// the request's items. The Store's contract stays all-or-nothing:
//
//   - A step that refuses: the steps before it are released (tw_release)
//     before Reserve returns the refusal. Meanwhile their counters hold
//     the refused amounts, so a concurrent request may be refused that
//     would have fitted; none is admitted over a limit. The refusal
//     reports the steps before as fitting, with what they had left and
//     held in flight before, and the steps after (not asked) as fitting
//     and full, nothing in flight.
//   - A step that fails: the steps before it are released, and the failed
//     one too unless its failure certainly changed nothing (a release
//     that arrives first leaves a tombstone, so the step charges nothing
//     when it lands). When every release answers, Reserve's error wraps
//     [accounting.ErrNotApplied]: the decision changed nothing. When one
//     does not, the error is ambiguous and the Limiter releases every
//     slot in the background.
//   - A replica that dies between steps leaves its earlier steps charged
//     until their windows let them go, and their records for
//     [accounting.RecordExpiry]: an over-reservation of at most its
//     in-flight estimates, never an overshoot.
//   - [Store.Settle] and [Store.Release] go to every slot of their items,
//     each call with a timeout of its own. Each slot's record makes its
//     settlement happen once, so a settlement retried after a partial one
//     books only the slots it missed; Settle returns the first failure,
//     or [accounting.ErrNoReservation] when no slot had a record, or nil.
//     A step whose items were all optional and none fitted is released at
//     once when another step charged something (no settlement names it).
//   - Steps run at their masters' times: two lifetime runs that one
//     reservation starts on two masters start a step's latency apart.
//
// The steps of one Reserve share [Options.Timeout]; each release after a
// refusal or failure has its own. A decision costs one round trip per
// slot it touches. A counter not scoped by ShardBy is one key on one
// master, which every decision that meets it calls: a global limit on
// every request puts a share of every decision on one master, and
// sharding relieves it of nothing (BenchmarkCluster measures the Redis
// CPU per decision per master for both layouts). The layout decides every
// key, so replicas sharing a cluster must all run the same one; another
// layout starts afresh.
//
// The client follows MOVED and ASK (a resharding, a failover), which
// re-send a command Redis did not run. It re-sends nothing else: go-redis's
// cluster client would retry a command after a broken connection or a
// read timeout, which for tw_reserve could charge twice, so every FCALL
// is marked NoRetry. A call refused with TRYAGAIN (during a slot's
// migration its keys are split between two masters) or CLUSTERDOWN
// changed nothing, and is sent again, 1 to 10 ms apart, for at most
// half the call's timeout in waits (an attempt the deadline cuts short
// would be ambiguous, and cost a release): a migration moves one principal's few keys in
// milliseconds, and a retry turns what would be a store error for every
// request on that slot into a short delay.
//
// A manual CLUSTER FAILOVER loses no acknowledged write (the replica
// catches up before it takes over). An automatic failover, after a
// master dies, loses what the master had acknowledged but not yet
// replicated (replication is asynchronous): a reservation lost so is
// not counted, an overshoot of at most what was admitted in the
// replication lag; a settlement lost so leaves the reservation's
// estimate charged and its record until it expires.
//
// For failover without a cluster, use Sentinel
// ([Options.SentinelMasterName]).
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
