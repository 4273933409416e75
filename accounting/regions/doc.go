// Package regions keeps one budget across regions: a global limit, say
// $50,000 a month for the company, enforced by regions that each run
// their own tokenwarden replicas on their own store (a regional Redis),
// with only leases, never a request, crossing between regions.
//
// # Model
//
// A limit marked [accounting.Limit.AcrossRegions] is leased. A global
// [Ledger], on one Redis every region reaches, records for each window of
// the limit what it granted each region. A region's [Region] (one per
// replica, all its state in the region's store, so that its replicas
// agree) admits requests on its own store under its cap: what the ledger
// has granted it in the window. The Limiter reserves the limit's counter
// with the cap as the counter's limit, so a request costs one store call
// in its region, as any other, and the regional counter holds everything
// the region spent.
//
//   - Acquire: when a request does not fit the cap, the region asks the
//     ledger for the larger of a chunk (Options.Chunk of the limit) and
//     what is missing, waiting at most Options.AcquireTimeout, and the
//     request is tried once more. The ledger grants what is free: the
//     limit less what every region holds. Ahead of need, [Region.Sync]
//     (every SyncInterval, from [Region.Run]) acquires a chunk when less
//     than half of one is left.
//   - Report: Sync tells the ledger what the region has used, which
//     renews its lease.
//   - Return: Sync gives back all but two chunks when more than three
//     are unused (the gap keeps a region from returning and acquiring
//     on alternate syncs), and [Region.Close] everything unused; so does
//     Sync for the counters of limits a reload removed
//     ([Region.Retain]).
//
// A cap only grows within a window (the region's grants are counted on a
// counter of their own in its store, in the same window as the spending),
// so a replica's copy of the cap is at most too low, as long as the store
// keeps its data (see below for one that forgets). A reservation the
// store charged in another window than its cap's (the month turned) is
// released and tried again under the new window's cap.
//
// # Returning without overspending
//
// Budget given back must never be spent twice: by the region that gives
// it and by the one the ledger gives it to next. So the region first
// makes it unspendable to itself (charges it to its counter, in a store
// call that fits only if that much is unspent), then counts it on a
// counter of returns (a call of its own: on a sharded store the two
// counters may sit in different slots, which no one call changes
// atomically), and only then tells the ledger, which counts it as
// released. A crash between the two charges loses that amount for the
// window (the region reports it as used); a crash before the ledger
// hears of it, until any replica of the region reports again (the report
// carries the returns). Neither overspends. Budget the ledger reclaimed
// is made unspendable in the same order.
//
// # Leases lapse: dead and partitioned regions
//
// A replica spends on its region's lease for Options.LeaseTTL after it
// last reached the ledger, by its own clock, measured from when the call
// was sent; then its cap is 0 until it reaches the ledger again. The
// ledger reclaims a region's lease only LeaseTTL + Options.Grace after it
// last heard from any of the region's replicas, by its own clock (so
// every replica has stopped by then, whichever called last): it sets the region's holding to the use the region
// last reported, and the rest is free for the others. A partitioned
// region has stopped spending before then (Grace covers the two clocks'
// drift and a call in flight). When it reaches the ledger again, it learns
// what was reclaimed and makes that unspendable to itself too.
//
// # A store that forgets, and names shared
//
// The region's store holds what it spent; the ledger, what it granted.
// A store that loses its data (a restart without persistence, a flush, a
// failover to an empty replica) would let the region spend its grants
// again on counters back at zero, and two regions configured with one
// name would each spend everything granted under it. So each window the
// first replica to look stamps the region's store with a random
// incarnation id, written only if absent (a charge of the id under the
// id as the limit fits only an empty counter), which every replica then
// reads; and every ledger call carries it. The ledger counts grants,
// returns and use per incarnation, and a region's cap is what its own
// incarnation was granted. A call from another incarnation than the
// region's last (the store forgot, or another region has the name)
// writes off what the last one held: it stays counted as spent for the
// rest of the window, never reclaimed, so the budget it held is lost,
// never spent twice. The region logs it as an error and counts it
// (tokenwarden_region_lease_written_off_total): any write-off is an
// incident. A grant whose answer was lost is still its incarnation's,
// recorded at its next sync. Two regions sharing a name stay correct,
// each capped by its own grants, at the cost of a write-off log line per
// alternation.
//
// Two gaps remain. A replica that was running when its store forgot
// admits on its cached cap until its next sync (at most SyncInterval),
// which stamps the new incarnation: the region may spend its cap at the
// loss once more. And a failover to a replica that kept the incarnation
// but lost the last writes lets the region spend what those writes
// recorded again. Both are terms of the bound below.
//
// # The bound
//
// What a region spent after its last report and before it stopped is
// unknown to the ledger when it reclaims. That is the overshoot: within a
// window, what all regions spend is at most
//
//	limit + Σ (granted − released − reported) over leases reclaimed from regions still spending
//	      + Σ caps cached by running replicas when their store forgot its counters
//	      + Σ spending a store's failover lost while keeping its incarnation
//	      + Σ settlement overrun
//
// where the first sum is each reclaimed lease's unreported part (the
// ledger's reclaimed metric counts it), the next two are zero for a
// store that keeps its data (persisted, replicated without loss), and the
// last is what settlements charged above their estimates, as with any
// limit. A region that dies
// costs the others nothing after LeaseTTL + Grace: its unreported lease
// returns to them (they lose none of the budget), and what it admitted
// after its last report is spent on that returned part (at most its
// outstanding lease, counted in the formula). A region the ledger never
// reclaims from, that is one that reports at least every LeaseTTL +
// Grace, never makes the regions overspend (except by settlement
// overrun).
//
// # What the ledger stores
//
// One Redis hash per limit and window (the window as the regional store
// marks it: [accounting.CounterState.Mark]), under [LedgerKeyPrefix], with
// five fields per incarnation of a region and one per region; each call is one script on that one key (a few
// small hashes and one call per replica per sync interval: one Redis
// server carries it, and tokenwarden's config takes one or a
// Sentinel-monitored one). A record expires a while after its window
// ends. Time is Redis's (TIME), the one clock every region agrees on;
// the ledger should persist (AOF) or be replicated, since a ledger that
// forgets a window grants its budget afresh.
//
// # Limits and clocks
//
// A limit kept across regions is an unscoped fixed window or calendar
// day or month ([accounting.Limit.Validate] refuses the rest): the
// ledger leases per counter, and a cap that only grows within a window
// stands in for a limit only where usage counts up and starts afresh.
// Each region's window is its own store's; regional stores whose clocks
// disagree by a few seconds spend the next window's budget early or the
// last one's late, each from its own window's ledger record, so no window
// is overspent.
package regions
