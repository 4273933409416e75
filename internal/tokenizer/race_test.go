//go:build race

package tokenizer

// raceEnabled thins the slowest tests under the race detector, which
// makes the exact tokenizer about ten times slower.
const raceEnabled = true
