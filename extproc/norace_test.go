//go:build !race

package extproc

// raceAllocSlack is zero without the race detector: counts are exact.
const raceAllocSlack = 0
