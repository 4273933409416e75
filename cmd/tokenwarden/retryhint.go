package main

import (
	"cmp"
	"fmt"
	"time"

	"github.com/tokenwarden/tokenwarden/extproc"
)

// retryHintSummary says, for check-config, which 429s tell clients not
// to retry.
func retryHintSummary(maxWait time.Duration) string {
	if maxWait < 0 {
		return "429s with a reset time invite a retry however long the wait (should_retry_max off)"
	}
	return fmt.Sprintf("429s whose limit frees in more than %s say x-should-retry: false and name the reset time (x-tokenwarden-reset-at)",
		cmp.Or(maxWait, extproc.DefaultShouldRetryMax))
}
