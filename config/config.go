package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// The defaults of the file's own settings, which no library owns.
const (
	// DefaultListen is where the ext_proc gRPC server listens when the
	// file sets no listen.
	DefaultListen = "127.0.0.1:50051"
	// DefaultAdmin is where the admin HTTP server (/metrics, /healthz,
	// /readyz) listens when the file sets no admin.
	DefaultAdmin = "127.0.0.1:9090"
	// DefaultShutdownGrace is how long in-flight streams may run after
	// SIGTERM when the file sets no shutdown_grace.
	DefaultShutdownGrace = 15 * time.Second
)

// Config is a valid config file, in the options of the packages that run
// it. Library options are left at their zero value where the file leaves
// a key out, so that each library's own default applies; the file's own
// settings (listen, admin, shutdown_grace, log) are filled in.
type Config struct {
	// Listen is the ext_proc gRPC address (host:port).
	Listen string
	// Admin is the admin HTTP address (host:port).
	Admin string
	// ShutdownGrace bounds how long in-flight streams may run after
	// SIGTERM before they are cut (and settled).
	ShutdownGrace time.Duration
	// AdminPprof serves Go's /debug/pprof/ on the admin port.
	AdminPprof bool
	Log        Log
	Store      Store
	Reload     Reload
	// Accounting holds the limits and prices; set Store, Logger and
	// Registerer before passing it to accounting.New.
	Accounting accounting.Options
	// Server holds the identity sources, estimation and settlement
	// settings, with Counter built from the estimation section; set
	// Limiter, Logger and Registerer before passing it to
	// extproc.NewServer.
	Server extproc.Options
	// Tokenizer is the estimation section as the token counter takes it:
	// Server.Counter is built from it. Reports on estimates (tokenwarden
	// estimate, check-config) read it.
	Tokenizer tokenizer.Config
	// Tracing is the tracing section; nil (no section) means off. Its
	// identity attributes are Server.TraceAttributes.
	Tracing *Tracing
	// Regions is the regions section; nil (no section) means this
	// server keeps no limit across regions.
	Regions *Regions

	// AdminTokenFile is admin_token_file; AdminToken the token read from
	// it, which the admin listener's usage API then requires ("" when
	// the file sets none). Never print AdminToken.
	AdminTokenFile string
	AdminToken     string
}

// Log is the log section.
type Log struct {
	// Level is the least level logged; the zero value is slog.LevelInfo.
	Level slog.Level
	// Text selects slog's text handler; the default is JSON.
	Text bool
}

// Store is the store section.
type Store struct {
	// Redis configures the Redis store; nil means the memory store.
	Redis *redisstore.Options
	// AllowEviction lets a server start, and report ready, on a Redis
	// whose maxmemory-policy is not noeviction (a full Redis under such a
	// policy deletes counters, and exhausted budgets start again).
	AllowEviction bool
}

// Load reads and parses the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse parses and validates a config file. A file that is not YAML, or
// is empty, is an error of its own; otherwise every problem of the file
// is reported, in an [*Error], sorted by field. Unknown keys are
// problems: a misspelt option must not silently fall back to a default.
func Parse(data []byte) (*Config, error) {
	var f file
	decodeErrs, err := decode(data, &f)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p := &problems{}
	for _, e := range decodeErrs {
		p.file = append(p.file, e)
		p.shadow = append(p.shadow, e.Field)
	}
	c := &Config{}
	c.fileSettings(&f, p)
	c.adminToken(&f, p)
	c.store(&f, p)
	c.identity(&f, p)
	c.estimation(&f, p)
	c.models(&f)
	c.limits(&f, p)
	c.settlement(&f, p)
	c.requestBytes(&f, p)
	c.reload(&f, p)
	c.tracing(&f, p)
	c.regions(&f, p)

	// What the libraries say about their options, named by the keys of
	// the file.
	p.library(c.Accounting.Validate())
	p.library(c.Server.Validate())
	if c.Store.Redis != nil {
		p.library(accounting.PrefixFields("store.redis", c.Store.Redis.Validate()))
	}
	counter, err := tokenizer.New(c.Tokenizer)
	p.library(accounting.PrefixFields("estimation", err))

	if err := p.err(); err != nil {
		return nil, err
	}
	c.Server.Counter = counter
	return c, nil
}

// fileSettings reads the settings that belong to the binary rather than a
// library: addresses, shutdown grace, logging, pprof.
func (c *Config) fileSettings(f *file, p *problems) {
	c.Listen, c.Admin = f.Listen, f.Admin
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Admin == "" {
		c.Admin = DefaultAdmin
	}
	for _, a := range []struct{ field, addr string }{{"listen", c.Listen}, {"admin", c.Admin}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			p.add(a.field, "%q is not host:port", a.addr)
		}
	}
	c.ShutdownGrace = DefaultShutdownGrace
	if f.ShutdownGrace != "" {
		d, err := time.ParseDuration(f.ShutdownGrace)
		if err != nil || d < 0 {
			p.add("shutdown_grace", "%q is not a duration", f.ShutdownGrace)
		}
		c.ShutdownGrace = d
	}
	switch f.Log.Level {
	case "debug":
		c.Log.Level = slog.LevelDebug
	case "", "info":
		c.Log.Level = slog.LevelInfo
	case "warn":
		c.Log.Level = slog.LevelWarn
	case "error":
		c.Log.Level = slog.LevelError
	default:
		p.add("log.level", "%q is not debug, info, warn or error", f.Log.Level)
	}
	switch f.Log.Format {
	case "", "json":
	case "text":
		c.Log.Text = true
	default:
		p.add("log.format", "%q is not json or text", f.Log.Format)
	}
	c.AdminPprof = f.AdminPprof
	c.Server.StripAcceptEncoding = f.StripAcceptEncoding
}

func (c *Config) store(f *file, p *problems) {
	r := &f.Store.Redis
	// Read whatever the store type, so that a bad timeout is found
	// before the day the type becomes redis.
	opts := r.options("store.redis", 0, p)
	switch f.Store.Type {
	case "", "memory":
	case "redis":
		c.Store.Redis = &opts
		c.Store.AllowEviction = r.AllowEviction
		if _, ok := f.Identity.Attributes[r.ShardBy]; r.ShardBy != "" && !ok && r.ShardBy != extproc.AttributeModel && r.ShardBy != extproc.AttributeAPI {
			// Only a limit scoped by an attribute with a source can
			// place its keys by it.
			p.add("store.redis.shard_by", "%q has no source under identity.attributes", r.ShardBy)
		}
	default:
		p.add("store.type", "%q is not memory or redis", f.Store.Type)
	}
}

// options is the redisstore.Options a Redis section (at field) describes.
// Its timeout is def when the section sets none, and a timeout that is
// not a positive duration is reported.
func (r *redisFile) options(field string, def time.Duration, p *problems) redisstore.Options {
	timeout := def
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		if err != nil || d <= 0 {
			p.add(field+".timeout", "%q is not a positive duration", r.Timeout)
		}
		timeout = max(d, 0)
	}
	return redisstore.Options{
		URL:                r.URL,
		Timeout:            timeout,
		PoolSize:           r.PoolSize,
		MinIdleConns:       r.MinIdleConns,
		HashTag:            r.HashTag,
		ShardBy:            r.ShardBy,
		ClusterAddrs:       r.ClusterAddrs,
		SentinelMasterName: r.Sentinel.MasterName,
		SentinelAddrs:      r.Sentinel.Addrs,
		SentinelPassword:   r.Sentinel.Password,
	}
}

func (c *Config) identity(f *file, p *problems) {
	switch f.OtherPaths {
	case "", "pass":
	case "count":
		c.Server.CountOtherPaths = true
	default:
		p.add("other_paths", "%q is not pass or count", f.OtherPaths)
	}
	for _, name := range slices.Sorted(maps.Keys(f.UnmeteredAPIs)) {
		switch v := f.UnmeteredAPIs[name]; v {
		case "refuse":
		case "allow":
			if c.Server.AllowUnmetered == nil {
				c.Server.AllowUnmetered = map[string]bool{}
			}
			c.Server.AllowUnmetered[name] = true
			continue
		default:
			p.add("unmetered_apis."+name, "%q is not refuse or allow", v)
		}
		if !slices.Contains(extproc.UnmeteredFamilies(), name) {
			// A refused family's name is checked here; an allowed one's
			// by the server's options.
			p.add("unmetered_apis."+name, "is not an unmetered API family (%s)", strings.Join(extproc.UnmeteredFamilies(), ", "))
		}
	}
	id := &c.Server.Identity
	for _, name := range slices.Sorted(maps.Keys(f.Identity.Attributes)) {
		a := f.Identity.Attributes[name]
		src := extproc.AttributeSource{Name: name, Header: strings.ToLower(a.Header), EnvoyAttribute: a.EnvoyAttribute}
		if m := a.Metadata; m != nil {
			src.Metadata = &extproc.MetadataSource{Namespace: m.Namespace, Key: m.Key, Path: m.Path}
		}
		if a.Default != nil {
			src.Default, src.HasDefault = *a.Default, true
		}
		id.Attributes = append(id.Attributes, src)
	}
	id.Required = f.Identity.Required
}

func (c *Config) estimation(f *file, p *problems) {
	e := &f.Estimation
	t := &c.Tokenizer
	t.Mode, t.CharsPerToken, t.ExactMaxBytes = tokenizer.Mode(e.Tokenizer), e.CharsPerToken, e.ExactMaxBytes
	for _, r := range e.PerModel {
		t.PerModel = append(t.PerModel, tokenizer.Rule{Pattern: r.Pattern, Mode: tokenizer.Mode(r.Tokenizer), CharsPerToken: r.CharsPerToken})
	}
	if d := e.DefaultImage; d != nil {
		t.DefaultImageWidth, t.DefaultImageHeight = d.Width, d.Height
	}
	c.Server.DefaultOutputCap = e.DefaultOutputCap
	c.Server.InjectOutputCap = e.InjectOutputCap == nil || *e.InjectOutputCap
	c.Server.InjectStreamUsage = e.InjectStreamUsage == nil || *e.InjectStreamUsage
	lo := &e.LearnedOutput
	c.Server.LearnedOutput = extproc.LearnedOutput{Enabled: lo.Enabled, Quantile: lo.Quantile, MinSamples: lo.MinSamples,
		DecaySamples: lo.DecaySamples, Floor: lo.Floor, MaxKeys: lo.MaxKeys, Scope: lo.Scope}
	for i, attr := range lo.Scope {
		if _, ok := f.Identity.Attributes[attr]; !ok && attr != extproc.AttributeModel && attr != extproc.AttributeAPI && attr != "" {
			p.add(fmt.Sprintf("estimation.learned_output.scope[%d]", i), "%q has no source under identity.attributes", attr)
		}
	}
}

func (c *Config) models(f *file) {
	c.Accounting.Prices = make(accounting.Prices, len(f.Models))
	for model, pr := range f.Models {
		c.Accounting.Prices[model] = accounting.Price(pr)
	}
}

func (c *Config) limits(f *file, p *problems) {
	known := func(attr string) bool {
		_, ok := f.Identity.Attributes[attr]
		return ok || attr == extproc.AttributeModel || attr == extproc.AttributeAPI
	}
	for i, lf := range f.Limits {
		field := fmt.Sprintf("limits[%d]", i)
		l := accounting.Limit{Name: lf.Name, Scope: lf.Scope, Match: lf.Match}
		var err error
		if l.Dimension, err = accounting.ParseDimension(lf.Dimension); err != nil {
			p.add(field+".dimension", "%v", err)
			// The amounts are in the dimension's unit.
			p.skip(field+".limit", field+".burst")
		} else {
			if l.Limit, err = amount(l.Dimension, lf.Limit); err != nil {
				p.add(field+".limit", "%v", err)
			}
			if l.Burst, err = amount(l.Dimension, lf.Burst); err != nil {
				p.add(field+".burst", "%v", err)
			}
			if lf.LimitFrom != nil {
				l.From = &accounting.LimitFrom{Attribute: lf.LimitFrom.Attribute}
				if l.From.Ceiling, err = amount(l.Dimension, lf.LimitFrom.Ceiling); err != nil {
					p.add(field+".limit_from.ceiling", "%v", err)
				}
			}
		}
		concurrent := l.Dimension == accounting.Concurrent
		if concurrent {
			leaseOf(&l, &lf, field, p)
		} else if lf.Lease != "" {
			p.add(field+".lease", "only a concurrent limit has a lease")
		}
		if lf.Algorithm != "" && !concurrent {
			if l.Algorithm, err = accounting.ParseAlgorithm(lf.Algorithm); err != nil {
				p.add(field+".algorithm", "%v", err)
				// Whether a burst or a calendar month is allowed
				// depends on the algorithm.
				p.skip(field+".burst", field+".window")
			}
		}
		lifetime := l.Algorithm == accounting.Lifetime && !concurrent
		if lifetime {
			maxDurationOf(&l, &lf, field, p)
		} else if lf.MaxDuration != "" {
			p.add(field+".max_duration", "only a lifetime limit has a max_duration")
		}
		if concurrent || lifetime {
			// Its window is its lease, or the run's max duration.
		} else if l.Window, l.Calendar, err = parseWindow(lf.Window); err != nil {
			p.add(field+".window", "%v", err)
		}
		onExhaustedOf(&l, &lf, field, p)
		switch lf.OnStoreError {
		case "":
			// Money limits fail closed; a request count protects servers,
			// not the bill, and fails open.
			if l.Dimension == accounting.Requests || concurrent {
				l.OnStoreError = accounting.FailOpen
			}
		case "deny":
		case "allow":
			l.OnStoreError = accounting.FailOpen
		default:
			p.add(field+".on_store_error", "%q is not deny or allow", lf.OnStoreError)
		}
		if l.Mode, err = accounting.ParseMode(lf.Mode); err != nil {
			p.add(field+".mode", "%v", err)
		}
		timeZone(&l, lf, field, p)
		for j, attr := range lf.Scope {
			if !known(attr) {
				p.add(fmt.Sprintf("%s.scope[%d]", field, j), "%q has no source under identity.attributes (and is not model or api)", attr)
			}
		}
		if a := lf.LimitFrom; a != nil && a.Attribute != "" && !known(a.Attribute) {
			p.add(field+".limit_from.attribute", "%q has no source under identity.attributes", a.Attribute)
		}
		if r := lf.ReserveFor; r != nil {
			l.ReserveFor = &accounting.ReserveFor{Attribute: r.Attribute, Value: r.Value, Share: r.Share}
			if r.Attribute != "" && !known(r.Attribute) {
				p.add(field+".reserve_for.attribute", "%q has no source under identity.attributes (and is not model or api)", r.Attribute)
			}
		}
		for _, attr := range slices.Sorted(maps.Keys(lf.Match)) {
			if !known(attr) {
				p.add(field+".match."+attr, "%q has no source under identity.attributes (and is not model or api)", attr)
			}
		}
		l.AcrossRegions = lf.Across
		c.Accounting.Limits = append(c.Accounting.Limits, l)
	}
}

func (c *Config) settlement(f *file, p *problems) {
	if hr := f.Settlement.HiddenReasoningModels; hr != nil {
		c.Server.HiddenReasoningModels = append([]string{}, *hr...)
	}
	switch f.Settlement.Background {
	case "", "reserve":
	case "refuse":
		c.Server.RefuseBackground = true
	default:
		p.add("settlement.background", "%q is not reserve or refuse", f.Settlement.Background)
	}
	c.Server.ContextWindows = f.Settlement.ContextWindows
	c.Server.AzureDeployments = f.Azure.Deployments
	if f.ServiceTiers != nil {
		c.Server.ServiceTierFactors = f.ServiceTiers
	}
	c.Server.IETFRateLimitHeaders = f.RateLimitHeaders.IETF
	c.Server.NoAnthropicRateLimitHeaders = f.RateLimitHeaders.Anthropic != nil && !*f.RateLimitHeaders.Anthropic
	c.Server.ShouldRetryMax = shouldRetryMax(f.RateLimitHeaders.ShouldRetryMax, p)
}

// amount converts a limit as written to the dimension's integer unit:
// cost in USD becomes micro-dollars; requests and tokens must be whole.
// Whether the amount is positive is the limit's to say.
func amount(d accounting.Dimension, v float64) (int64, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e15 {
		return 0, fmt.Errorf("%v is out of range", v)
	}
	if d == accounting.Cost {
		return int64(math.Round(v * 1e6)), nil
	}
	if v != math.Trunc(v) {
		unit := d.String()
		if d == accounting.Concurrent {
			unit = "requests in flight"
		}
		return 0, fmt.Errorf("%v must be a whole number of %s", v, unit)
	}
	return int64(v), nil
}

// parseWindow parses a window: a Go duration, "Nd" days, or the calendar
// names day (24h from midnight UTC) and month. Its range is the limit's
// to check.
func parseWindow(s string) (time.Duration, accounting.Calendar, error) {
	switch s {
	case "":
		return 0, 0, errors.New("required")
	case "day":
		return 24 * time.Hour, accounting.NoCalendar, nil
	case "month":
		return 0, accounting.CalendarMonth, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 1e6 {
			return 0, 0, fmt.Errorf("%q is not a duration", s)
		}
		return time.Duration(days) * 24 * time.Hour, accounting.NoCalendar, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not a duration (e.g. 1m, 1h, 7d, day, month)", s)
	}
	return d, accounting.NoCalendar, nil
}
