package config

import (
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// onExhaustedFile says what a limit does with a request it refuses,
// instead of a 429 at once.
type onExhaustedFile struct {
	// WaitUpTo holds the request up to this long for capacity to return
	// (accounting.Limit.WaitUpTo).
	WaitUpTo string `yaml:"wait_up_to"`
}

// waitOf reads a limit's on_exhausted.wait_up_to, a Go duration, into
// l.WaitUpTo, where accounting.Limit.Validate checks its range.
func waitOf(l *accounting.Limit, lf *limitFile, field string, p *problems) {
	if lf.OnExhausted == nil || lf.OnExhausted.WaitUpTo == "" {
		return
	}
	d, err := time.ParseDuration(lf.OnExhausted.WaitUpTo)
	if err != nil {
		p.add(field+".on_exhausted.wait_up_to", "%q is not a duration (e.g. 2s, 500ms)", lf.OnExhausted.WaitUpTo)
		return
	}
	l.WaitUpTo = d
}
