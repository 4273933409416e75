package config

import (
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// timeZone reads a limit's time_zone: the IANA zone whose calendar its
// day or month window follows. UTC (or no time_zone) keeps the windows
// that UTC days and months always had, with the same counters: a day of
// 24 hours aligned to the Unix epoch, the UTC calendar month.
func timeZone(l *accounting.Limit, lf limitFile, field string, p *problems) {
	switch {
	case lf.TimeZone == "":
		return
	case l.Dimension == accounting.Concurrent:
		p.add(field+".time_zone", "a concurrent limit has no calendar (it counts requests in flight); only a day or month window follows a time zone")
		return
	case l.Algorithm == accounting.Lifetime:
		p.add(field+".time_zone", "a lifetime limit has no calendar (its run starts at its first request); only a day or month window follows a time zone")
		return
	}
	if lf.Window != "day" && lf.Window != "month" {
		p.add(field+".time_zone", "only a day or month window follows a time zone, not %q", lf.Window)
		return
	}
	if lf.TimeZone == "Local" {
		// The machine's zone: replicas on different machines would
		// disagree on the day.
		p.add(field+".time_zone", `"Local" depends on the machine; name the zone (e.g. Europe/Berlin)`)
		return
	}
	loc, err := time.LoadLocation(lf.TimeZone)
	if err != nil {
		p.add(field+".time_zone", "%q is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)", lf.TimeZone)
		return
	}
	if loc == time.UTC {
		return
	}
	l.Location = loc
	if lf.Window == "day" {
		l.Calendar = accounting.CalendarDay
	}
}
