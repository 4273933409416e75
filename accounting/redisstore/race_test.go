//go:build race

package redisstore

// raceAllocSlack is what the race detector may add to a call's
// allocations (it makes sync.Pool drop objects at random).
const raceAllocSlack = 8
