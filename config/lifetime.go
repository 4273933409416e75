package config

import "github.com/tokenwarden/tokenwarden/accounting"

// maxDurationOf reads what is particular to a lifetime limit (algorithm:
// lifetime): a budget for the whole life of its scope, typically an
// agent run. It has no window; its max_duration (the run's wall-clock
// cap, required) becomes the limit's Window, where
// accounting.Limit.Validate checks its range. Days are written as for a
// window (7d).
func maxDurationOf(l *accounting.Limit, lf *limitFile, field string, p *problems) {
	if lf.Window != "" {
		p.add(field+".window", "a lifetime limit has no window: max_duration caps the run from its first request")
	}
	switch d, cal, err := parseWindow(lf.MaxDuration); {
	case lf.MaxDuration == "":
		p.add(field+".max_duration", "required for a lifetime limit (the longest a run may go on, e.g. 1h)")
	case err != nil || cal != accounting.NoCalendar || lf.MaxDuration == "day":
		p.add(field+".max_duration", "%q is not a duration (e.g. 30m, 2h, 7d)", lf.MaxDuration)
	default:
		l.Window = d
	}
}
