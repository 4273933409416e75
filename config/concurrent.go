package config

import (
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// leaseOf reads what is particular to a concurrent limit (dimension:
// concurrent): it counts leases, so it names no algorithm and no window,
// and its lease (accounting.DefaultLease when unset) becomes the limit's
// Window, where accounting.Limit.Validate checks its range.
func leaseOf(l *accounting.Limit, lf *limitFile, field string, p *problems) {
	l.Algorithm = accounting.Leases
	if lf.Algorithm != "" {
		p.add(field+".algorithm", "a concurrent limit counts requests in flight; it takes no algorithm")
	}
	if lf.Window != "" {
		p.add(field+".window", "a concurrent limit has no window (its lease bounds a request that never settles)")
	}
	l.Window = accounting.DefaultLease
	if lf.Lease == "" {
		return
	}
	d, err := time.ParseDuration(lf.Lease)
	if err != nil {
		p.add(field+".lease", "%q is not a duration (e.g. 10m)", lf.Lease)
		return
	}
	l.Window = d
}
