// Package learned keeps, per key, a bounded and decaying estimate of how
// many output tokens completions use, so that a reservation can hold what
// completions of a kind really produce instead of the output cap most of
// them never reach.
//
// An [Estimator] holds one sketch per key (in tokenwarden: the API, the
// model's family and, when configured, scope attributes). A sketch is a
// fixed-size histogram of the samples fed to it, on a log scale with
// eight buckets per doubling, each weighing the samples it was given
// with an exponential decay: every new sample multiplies the weights of
// the older ones by 1 − 1/DecaySamples, so that a sketch reflects about
// the last DecaySamples completions and follows a workload that changes.
// A quantile of a sketch is the upper bound of the bucket where it falls,
// so it errs up, by at most one bucket (2^(1/8), about 9%).
//
// Memory is fixed: a sketch is [NumBuckets] float32 weights and a count,
// about 1 KiB, and an Estimator holds at most MaxKeys of them, dropping
// the least recently used key to make room for a new one. Only
// [Estimator.Observe] creates keys; [Estimator.Estimate] of an unknown
// key costs nothing. Neither allocates once a key exists.
//
// The estimate is per process: each replica learns from the completions
// it settles itself.
package learned
