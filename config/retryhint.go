package config

import (
	"time"

	"github.com/tokenwarden/tokenwarden/extproc"
)

// MaxShouldRetryMax bounds rate_limit_headers.should_retry_max: no limit
// tokenwarden enforces frees later than a calendar month, so a longer
// value can only mean "off", which is spelt so.
const MaxShouldRetryMax = 31 * 24 * time.Hour

// shouldRetryMax reads rate_limit_headers.should_retry_max: empty is
// the default (extproc.DefaultShouldRetryMax), "off" is never (every 429
// with a reset time invites a retry), anything else a positive duration.
func shouldRetryMax(s string, p *problems) time.Duration {
	const field = "rate_limit_headers.should_retry_max"
	switch s {
	case "":
		return extproc.DefaultShouldRetryMax
	case "off":
		return -1
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.add(field, "%q is not a duration (e.g. 60s, 5m) or off", s)
	case d < time.Second || d > MaxShouldRetryMax:
		p.add(field, "%s is outside 1s..31d (off never says not to retry)", s)
	}
	return d
}
