package accounting

import (
	"time"
)

// A calendar window in a time zone follows the zone's days or months:
// a Berlin day starts at midnight in Berlin, and lasts 23 hours on the
// day clocks go forward and 25 on the day they go back. The window is
// identified by its start (µs since the Unix epoch), which every store
// gets from [FixedWindowAt]; a UTC month keeps its own index (year*12 +
// month - 1), so that counters kept before time zones existed keep
// counting in the same window.

// Zoned reports whether c's windows follow the calendar of a time zone
// other than UTC.
func (c *Counter) Zoned() bool {
	return c.Calendar != NoCalendar && c.Location != nil && c.Location != time.UTC
}

// calendarWindow returns the start and the end (µs) of the calendar day
// or month in loc that holds now (µs).
func calendarWindow(cal Calendar, loc *time.Location, now int64) (start, end int64) {
	t := time.UnixMicro(now).In(loc)
	y, m, d := t.Date()
	var s, e time.Time
	if cal == CalendarMonth {
		s, e = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	} else {
		s, e = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	return s.UnixMicro(), e.UnixMicro()
}

// ZoneBounds returns the boundaries of four consecutive calendar windows
// of c (which must be [Counter.Zoned]) around now (µs): the start of the
// window before the one holding now, that one's start, the next one's
// start and its end. A store that cannot compute a time zone's calendar
// itself (Redis's Lua) is given these, computed by its caller's clock,
// and picks among them by its own: the window holding its time, unless
// the two clocks differ by more than a window.
func ZoneBounds(c *Counter, now int64) [4]int64 {
	loc := c.location()
	s1, s2 := calendarWindow(c.Calendar, loc, now)
	s0, _ := calendarWindow(c.Calendar, loc, s1-1)
	_, s3 := calendarWindow(c.Calendar, loc, s2)
	return [4]int64{s0, s1, s2, s3}
}

// location is c's time zone, UTC when it has none.
func (c *Counter) location() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// CalendarName describes a calendar window for people: "calendar month",
// "calendar day in Europe/Berlin"; "" for a window that is not one.
func (l *Limit) CalendarName() string {
	var name string
	switch l.Calendar {
	case CalendarMonth:
		name = "calendar month"
	case CalendarDay:
		name = "calendar day"
	default:
		return ""
	}
	if l.Location != nil && l.Location != time.UTC {
		name += " in " + l.Location.String()
	}
	return name
}
