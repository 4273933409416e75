package config

import "time"

// DefaultWatchInterval is how often a server started with -config checks
// its file for a change when the file sets no reload.watch_interval.
const DefaultWatchInterval = 10 * time.Second

// MinWatchInterval is the shortest reload.watch_interval: the file is
// read and hashed at every check.
const MinWatchInterval = time.Second

// Reload is the reload section: how a running server picks up a changed
// config file.
type Reload struct {
	// WatchInterval is how often the file is checked for a change (its
	// content, not its time stamp); zero means the file is not watched,
	// and only SIGHUP reloads it.
	WatchInterval time.Duration
}

// reloadFile is the reload section as written.
type reloadFile struct {
	// WatchInterval is a duration; zero ("0", "0s") or "off" turns the
	// watch off.
	WatchInterval string `yaml:"watch_interval"`
}

func (c *Config) reload(f *file, p *problems) {
	switch s := f.Reload.WatchInterval; s {
	case "":
		c.Reload.WatchInterval = DefaultWatchInterval
	case "0", "off":
		c.Reload.WatchInterval = 0
	default:
		d, err := time.ParseDuration(s)
		if err != nil || (d < MinWatchInterval && d != 0) {
			p.add("reload.watch_interval", "%q is not a duration of at least %v (or 0 or off)", s, MinWatchInterval)
		}
		c.Reload.WatchInterval = d
	}
}
