//go:build race

package extproc_test

// ledgerDefaultN is TestLedger's size under the race detector, which
// makes a lifecycle about ten times dearer: half the full run's 10^4
// keeps the package's tests well within a minute on two cores.
const ledgerDefaultN = 5000
