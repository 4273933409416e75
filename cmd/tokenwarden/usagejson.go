package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The usage API's answers: what it says of a limit and of a counter,
// and how it writes them.

// limitJSON describes a limit as configured.
type limitJSON struct {
	Name      string            `json:"name"`
	Dimension string            `json:"dimension"`
	Unit      string            `json:"unit"`
	Scope     []string          `json:"scope"`
	Match     map[string]string `json:"match,omitempty"`
	Algorithm string            `json:"algorithm"`
	// Window is the limit's window; a concurrent limit's is its Lease,
	// a lifetime budget's its MaxDuration, named as in the config.
	Window      string `json:"window,omitempty"`
	Lease       string `json:"lease,omitempty"`
	MaxDuration string `json:"max_duration,omitempty"`
	// TimeZone is the zone a calendar day or month follows; none for UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// Mode is "shadow" for a limit counted but never enforced, absent
	// for an enforced one (the config's default).
	Mode string `json:"mode,omitempty"`
	// Limit is the capacity: a token bucket's burst. For a limit with
	// limit_from, the value the attributes asked about give.
	Limit int64 `json:"limit"`
	// Refill is a token bucket's refill per window.
	Refill int64 `json:"refill_per_window,omitempty"`
	// LimitFrom says where a request's value comes from, if not Limit.
	LimitFrom *limitFromJSON `json:"limit_from,omitempty"`
	// ReserveFor is the share kept for a privileged tier, if any.
	ReserveFor *reserveForJSON `json:"reserve_for,omitempty"`
}

// reserveForJSON is a limit's reserve_for, with what requests outside the
// tier are held to (of Limit).
type reserveForJSON struct {
	Attribute   string  `json:"attribute"`
	Value       string  `json:"value"`
	Share       float64 `json:"share"`
	OthersLimit int64   `json:"others_limit"`
}

// limitFromJSON is a limit's limit_from.
type limitFromJSON struct {
	Attribute string `json:"attribute"`
	Ceiling   int64  `json:"ceiling"`
}

// counterJSON is one counter's state.
type counterJSON struct {
	Scope        map[string]string `json:"scope_values"`
	Used         int64             `json:"used"`
	Remaining    int64             `json:"remaining"`
	ResetSeconds float64           `json:"reset_seconds"`
	ResetAt      string            `json:"reset_at"`
}

// limitUsageJSON is a limit and its counter's state.
type limitUsageJSON struct {
	limitJSON
	counterJSON
}

func describeLimit(l *accounting.Limit) limitJSON {
	j := limitJSON{
		Name: l.Name, Dimension: l.Dimension.String(), Unit: unit(l.Dimension),
		Scope: append([]string{}, l.Scope...), Match: l.Match,
		Algorithm: l.Algorithm.String(), Limit: l.Capacity(),
	}
	switch l.Algorithm {
	case accounting.Leases:
		j.Lease = configWindow(l)
	case accounting.Lifetime:
		j.MaxDuration = configWindow(l)
	default:
		j.Window = configWindow(l)
	}
	if l.Algorithm == accounting.TokenBucket {
		j.Refill = l.Limit
	}
	if l.Location != nil && l.Location != time.UTC {
		j.TimeZone = l.Location.String()
	}
	if l.Mode == accounting.Shadow {
		j.Mode = l.Mode.String()
	}
	if f := l.From; f != nil {
		j.LimitFrom = &limitFromJSON{Attribute: f.Attribute, Ceiling: f.Ceiling}
	}
	if r := l.ReserveFor; r != nil {
		j.ReserveFor = &reserveForJSON{Attribute: r.Attribute, Value: r.Value, Share: r.Share, OthersLimit: l.Limit - r.Reserved(l.Limit)}
	}
	return j
}

func (a *usageAPI) describeCounter(u accounting.LimitUsage) counterJSON {
	scope := make(map[string]string, len(u.Scope))
	for _, s := range u.Scope {
		scope[s.Name] = s.Value
	}
	return counterJSON{
		Scope: scope, Used: u.Used, Remaining: u.Remaining,
		ResetSeconds: float64(u.Reset.Milliseconds()) / 1000,
		ResetAt:      a.now().Add(u.Reset).UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano),
	}
}

// unit names the unit a dimension's amounts are in.
func unit(d accounting.Dimension) string {
	if d == accounting.Cost {
		return "micro_usd"
	}
	return d.String()
}

// configWindow writes a limit's window as the config file would.
func configWindow(l *accounting.Limit) string {
	d := l.Window
	switch {
	case l.Calendar == accounting.CalendarMonth:
		return "month"
	case l.Calendar == accounting.CalendarDay:
		return "day"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
