//go:build !race

package redisstore

// raceAllocSlack is zero without the race detector: counts are exact.
const raceAllocSlack = 0
