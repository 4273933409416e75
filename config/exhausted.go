package config

import (
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// onExhaustedFile is a limit's on_exhausted: what a request the limit
// refuses gets instead of a 429 at once. Both may be set: the request
// waits first, and is downgraded only if the wait ends in a refusal
// (accounting.Limiter.ReserveWaitingOrDowngrade).
type onExhaustedFile struct {
	// WaitUpTo holds the request up to this long for capacity to return
	// (accounting.OnExhausted.WaitUpTo), a Go duration.
	WaitUpTo string `yaml:"wait_up_to"`
	// DowngradeTo is a model to send the request to instead; the
	// limiter checks it (accounting.OnExhausted), naming the field.
	DowngradeTo string `yaml:"downgrade_to"`
}

// onExhaustedOf sets l's OnExhausted from the file's. Only the wait's
// syntax is checked here; accounting.Limit.Validate checks its range and
// the fallback model.
func onExhaustedOf(l *accounting.Limit, lf *limitFile, field string, p *problems) {
	if lf.OnExhausted == nil {
		return
	}
	l.OnExhausted.DowngradeTo = lf.OnExhausted.DowngradeTo
	if lf.OnExhausted.WaitUpTo == "" {
		return
	}
	d, err := time.ParseDuration(lf.OnExhausted.WaitUpTo)
	if err != nil {
		p.add(field+".on_exhausted.wait_up_to", "%q is not a duration (e.g. 2s, 500ms)", lf.OnExhausted.WaitUpTo)
		return
	}
	l.OnExhausted.WaitUpTo = d
}
