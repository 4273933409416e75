// Package accounting decides whether an LLM request may spend what it is
// estimated to cost, and books what it really cost afterwards.
//
// An embedder builds a [Limiter] with [New] from [Options] (the config
// package reads the limits and prices from a file), on a [Store]: memstore
// for one instance, redisstore for replicas that share limits, or one of
// its own that passes the storetest suite. extproc's server drives it; a
// program that meters LLM calls some other way can call [Limiter.Reserve]
// and [Reservation.Settle] itself.
//
// A Limiter never changes once made. To change the limits or prices of a
// running program, [Limiter.Reconfigure] makes a new one that shares the
// store, the metrics and the background retries: reservations settle under
// the Limiter they were made on, so a request in flight is charged by the
// rules it was admitted under.
//
// # Model
//
// A [Limit] caps one dimension (requests, tokens or USD cost) over a window,
// for every distinct tuple of its scope attributes (tenant, user, model, …).
// Two kinds cap something else: a [Concurrent] limit the requests in flight
// at once (see concurrency.go), a [Lifetime] limit what a scope such as an
// agent run spends in its whole life (see lifetime.go).
// A request is admitted in three steps, like a card payment:
//
//  1. Estimate: input tokens counted from the request plus the output cap.
//  2. Reserve: the estimate is charged, in one atomic step, against every
//     limit that applies to the request — on all of them or on none. (A
//     shadow limit, [Shadow], is charged when the request fits it and
//     never keeps it from the others.)
//  3. Settle: once the response is known, the real usage replaces the
//     estimate (a refund or an extra charge), exactly once per reservation.
//
// A limit may hold a request it refuses until capacity returns, for a
// short while, instead ([OnExhausted.WaitUpTo], [Limiter.ReserveWaiting]; see
// wait.go), or send it to a fallback model ([OnExhausted.DowngradeTo],
// [Limiter.ReserveOrDowngrade]; see exhausted.go), or both: the wait
// first, the fallback when the wait ends refused
// ([Limiter.ReserveWaitingOrDowngrade]).
//
// Reserving before the call is what makes the limit hold under concurrency:
// requests that run at the same time see each other's reservations, not
// just each other's finished usage.
//
// An admitted reservation leaves a record in the store until it is
// settled: the settlement applies only while the record is there and
// deletes it in the same step, which is what makes it happen once however
// often a retry repeats it. A reservation whose store call failed without
// a clear answer (a timeout may strike after the store acted) is released:
// refunded if its record is there, or else kept from ever applying by a
// tombstone (see [Store.Release] and [Limiter.Reserve]).
//
// A call whose usage is known only long after its request ends (a message
// batch, whose results are fetched days later) is reserved as any other,
// and its reservation then becomes a hold (see hold.go), which a later
// request settles once.
//
// # Counters and stores
//
// Each applicable limit becomes one [Counter]: a store key that encodes the
// limit and the request's scope values without ambiguity (see [CounterKey]),
// plus the algorithm and its parameters. A [Store] keeps the counters and
// implements the algorithms ([FixedWindow], [SlidingWindow], [TokenBucket],
// [Leases], [Lifetime]) identically; the store's clock, never the replica's, decides
// which window a charge falls in. The package storetest holds the contract
// suite every Store implementation must pass; memstore and redisstore
// implement it.
//
// A Store may also show its counters ([Inspector]): the Limiter's read
// side ([Limiter.Usage], [Limiter.CounterUsage], [Limiter.Top],
// [Limiter.ResetCounter]) answers an operator's "how much has this tenant
// left, who spends the most" from it, charging nothing.
//
// Amounts are integers: requests count 1, tokens count tokens, and cost
// counts micro-dollars (1e-6 USD), so that a price in USD per million tokens
// times a token count is a cost in micro-dollars.
package accounting
