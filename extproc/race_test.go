//go:build race

package extproc

// raceAllocSlack is what the race detector adds to a lifecycle's
// allocations, give or take: it makes sync.Pool drop objects at random
// (encoding/json's encoders, used by the body edits, come from one), so
// counts wander by a few.
const raceAllocSlack = 8
