// Package memstore is an in-memory [accounting.Store] for a single
// tokenwarden instance and for tests. An embedder passes New's Store as
// accounting.Options.Store when one process enforces the limits alone
// (config: store.type: memory); its counters die with the process.
//
// All counters sit behind one mutex: a reservation touches several
// counters at once and must be atomic across them, and one decision takes
// well under a microsecond, so a single lock is both correct and fast
// enough for one replica. Idle counters expire, and so do reservation
// records that nothing settled or released (after accounting.RecordTTL):
// counters wait in a heap by deadline and records in a queue in the order
// they were written, and every operation drops a few of those whose time
// has passed, so memory tracks active callers and requests in flight.
//
// The arithmetic of the three algorithms here is the reference the Redis
// store's scripts follow; the storetest suite holds both to it.
package memstore
