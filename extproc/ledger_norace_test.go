//go:build !race

package extproc_test

// ledgerDefaultN is TestLedger's size in a normal test run.
const ledgerDefaultN = 10000
