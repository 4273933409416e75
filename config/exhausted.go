package config

import "github.com/tokenwarden/tokenwarden/accounting"

// onExhaustedFile is a limit's on_exhausted: what a request the limit
// refuses gets instead of the 429.
type onExhaustedFile struct {
	// DowngradeTo is a model to send the request to instead; the
	// limiter checks it (accounting.OnExhausted), naming the field.
	DowngradeTo string `yaml:"downgrade_to"`
}

// onExhaustedOf sets l's OnExhausted from the file's.
func onExhaustedOf(l *accounting.Limit, lf *limitFile) {
	if lf.OnExhausted != nil {
		l.OnExhausted.DowngradeTo = lf.OnExhausted.DowngradeTo
	}
}
