package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// Config is the YAML config file, documented in README.md.
type Config struct {
	Listen     string                 `yaml:"listen"`
	Admin      string                 `yaml:"admin"`
	Store      StoreConfig            `yaml:"store"`
	Identity   IdentityConfig         `yaml:"identity"`
	Estimation EstimationConfig       `yaml:"estimation"`
	Models     map[string]PriceConfig `yaml:"models"`
	Limits     []LimitConfig          `yaml:"limits"`
	Log        LogConfig              `yaml:"log"`
	// ShutdownGrace bounds how long in-flight streams may run after
	// SIGTERM before they are cut (and settled).
	ShutdownGrace string `yaml:"shutdown_grace"`
	// AdminPprof serves Go's /debug/pprof/ on the admin port, for
	// profiling a server under load. Off by default: profiles expose
	// internals and cost CPU while they run.
	AdminPprof bool `yaml:"admin_pprof"`
	// StripAcceptEncoding removes accept-encoding from metered requests
	// so providers answer uncompressed (compressed answers are decoded
	// for their usage either way).
	StripAcceptEncoding bool `yaml:"strip_accept_encoding"`
	// Settlement configures what a request is charged when its response
	// reports no usage.
	Settlement SettlementConfig `yaml:"settlement"`
	// Azure configures Azure OpenAI deployment paths.
	Azure AzureConfig `yaml:"azure"`
}

// SettlementConfig configures settlement without a usage report.
type SettlementConfig struct {
	// HiddenReasoningModels are model patterns of models that reason
	// without streaming their reasoning: without a usage report they are
	// charged their whole output cap. Unset means the built-in list; []
	// means none.
	HiddenReasoningModels *[]string `yaml:"hidden_reasoning_models"`
	// Background is what happens to Responses API requests with
	// "background": true: reserve (admitted, charged their whole
	// reservation) or refuse (400).
	Background string `yaml:"background"`
}

// AzureConfig maps Azure OpenAI deployments to models.
type AzureConfig struct {
	Deployments map[string]string `yaml:"deployments"`
}

// StoreConfig selects the counter store.
type StoreConfig struct {
	Type  string      `yaml:"type"`
	Redis RedisConfig `yaml:"redis"`
}

// RedisConfig configures the Redis store.
type RedisConfig struct {
	URL      string `yaml:"url"`
	Timeout  string `yaml:"timeout"`
	PoolSize int    `yaml:"pool_size"`
	// MinIdleConns keeps connections open while idle, so a burst after a
	// quiet period does not pay for dials within the timeout.
	MinIdleConns int `yaml:"min_idle_conns"`
	// HashTag puts every key in one Redis Cluster slot (see README).
	HashTag string `yaml:"hash_tag"`
	// ClusterAddrs connects to a Redis Cluster through these seed nodes;
	// hash_tag is then required.
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// Sentinel, when MasterName is set, finds the master through
	// Sentinels; URL then only supplies credentials, TLS and DB.
	Sentinel SentinelConfig `yaml:"sentinel"`
	// AllowEviction lets the server start, and /readyz report ready, on a
	// Redis whose maxmemory-policy is not noeviction. Off by default: a
	// full Redis under such a policy deletes counters, and an exhausted
	// budget starts again.
	AllowEviction bool `yaml:"allow_eviction"`
}

// SentinelConfig names a Sentinel-monitored master.
type SentinelConfig struct {
	MasterName string   `yaml:"master_name"`
	Addrs      []string `yaml:"addrs"`
	Password   string   `yaml:"password"`
}

// IdentityConfig says where identity attributes come from.
type IdentityConfig struct {
	Attributes map[string]AttributeConfig `yaml:"attributes"`
	Required   []string                   `yaml:"required"`
}

// AttributeConfig is one attribute's source.
type AttributeConfig struct {
	Header   string          `yaml:"header"`
	Metadata *MetadataConfig `yaml:"metadata"`
	Default  *string         `yaml:"default"`
}

// MetadataConfig locates a value in Envoy's dynamic metadata.
type MetadataConfig struct {
	Namespace string   `yaml:"namespace"`
	Key       string   `yaml:"key"`
	Path      []string `yaml:"path"`
}

// EstimationConfig configures the estimate.
type EstimationConfig struct {
	Tokenizer     string  `yaml:"tokenizer"`
	CharsPerToken float64 `yaml:"chars_per_token"`
	// PerModel overrides tokenizer and chars_per_token for the models a
	// pattern matches ('*' matches anything); the first match wins.
	PerModel []ModelRuleConfig `yaml:"per_model"`
	// ExactMaxBytes bounds a text counted by the exact tokenizer (longer
	// text is approximated); 0 means 128 KiB.
	ExactMaxBytes int `yaml:"exact_max_bytes"`
	// DefaultImage sizes images whose size the request does not tell;
	// unset means the worst case for the model.
	DefaultImage      *ImageSizeConfig `yaml:"default_image"`
	DefaultOutputCap  int64            `yaml:"default_output_cap"`
	InjectOutputCap   *bool            `yaml:"inject_output_cap"`
	InjectStreamUsage *bool            `yaml:"inject_stream_usage"`
}

// ModelRuleConfig is one estimation.per_model rule.
type ModelRuleConfig struct {
	Pattern       string  `yaml:"pattern"`
	Tokenizer     string  `yaml:"tokenizer"`
	CharsPerToken float64 `yaml:"chars_per_token"`
}

// ImageSizeConfig is an image size in pixels.
type ImageSizeConfig struct {
	Width  int `yaml:"width"`
	Height int `yaml:"height"`
}

// PriceConfig is a model's price in USD per 1M tokens.
type PriceConfig struct {
	Input        float64 `yaml:"input"`
	CachedInput  float64 `yaml:"cached_input"`
	CacheWrite   float64 `yaml:"cache_write"`
	CacheWrite1h float64 `yaml:"cache_write_1h"`
	Output       float64 `yaml:"output"`
}

// LimitConfig is one limit as written in the file.
type LimitConfig struct {
	Name         string            `yaml:"name"`
	Dimension    string            `yaml:"dimension"`
	Scope        []string          `yaml:"scope"`
	Match        map[string]string `yaml:"match"`
	Algorithm    string            `yaml:"algorithm"`
	Limit        float64           `yaml:"limit"`
	Window       string            `yaml:"window"`
	Burst        float64           `yaml:"burst"`
	OnStoreError string            `yaml:"on_store_error"`
}

// LogConfig configures logging.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // json | text
}

// Settings is a validated config, in the types the server runs on.
type Settings struct {
	Listen, Admin string
	Store         StoreSettings
	Identity      extproc.Identity
	Tokenizer     string
	CharsPerToken float64
	Estimation    tokenizer.Config
	OutputCap     int64
	InjectCap     bool
	InjectUsage   bool
	Prices        accounting.Prices
	Limits        []accounting.Limit
	LogLevel      string
	LogFormat     string
	Grace         time.Duration
	AdminPprof    bool
	StripEncoding bool
	// HiddenReasoning is nil for the built-in list.
	HiddenReasoning  []string
	RefuseBackground bool
	AzureDeployments map[string]string
}

// StoreSettings is the validated store section.
type StoreSettings struct {
	Type         string
	URL          string
	Timeout      time.Duration
	PoolSize     int
	MinIdleConns int
	HashTag      string
	ClusterAddrs []string
	Sentinel     SentinelConfig
	// AllowEviction skips the start-up and /readyz check that every Redis
	// master has maxmemory-policy noeviction.
	AllowEviction bool
}

// reservedAttributes are filled in by the server, not by identity sources.
var reservedAttributes = []string{"model", "api"}

var limitName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ParseConfig parses and validates a config file. Errors name the field
// (limits[2].window, store.redis.url, …). Unknown fields are errors: a
// misspelt option must not silently fall back to a default.
func ParseConfig(data []byte) (*Settings, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config: the file is empty")
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return c.validate()
}

func fieldErr(field string, format string, args ...any) error {
	return fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, args...))
}

func (c *Config) validate() (*Settings, error) {
	s := &Settings{Listen: c.Listen, Admin: c.Admin, AdminPprof: c.AdminPprof, StripEncoding: c.StripAcceptEncoding}
	if s.Listen == "" {
		s.Listen = "127.0.0.1:50051"
	}
	if s.Admin == "" {
		s.Admin = "127.0.0.1:9090"
	}
	for field, addr := range map[string]string{"listen": s.Listen, "admin": s.Admin} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fieldErr(field, "%q is not host:port", addr)
		}
	}
	if err := c.validateStore(s); err != nil {
		return nil, err
	}
	if err := c.validateIdentity(s); err != nil {
		return nil, err
	}
	if err := c.validateEstimation(s); err != nil {
		return nil, err
	}
	if err := c.validatePrices(s); err != nil {
		return nil, err
	}
	if err := c.validateLimits(s); err != nil {
		return nil, err
	}
	if err := c.validateSettlement(s); err != nil {
		return nil, err
	}
	s.LogLevel, s.LogFormat = c.Log.Level, c.Log.Format
	if s.LogLevel == "" {
		s.LogLevel = "info"
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, s.LogLevel) {
		return nil, fieldErr("log.level", "%q is not debug, info, warn or error", s.LogLevel)
	}
	if s.LogFormat == "" {
		s.LogFormat = "json"
	}
	if s.LogFormat != "json" && s.LogFormat != "text" {
		return nil, fieldErr("log.format", "%q is not json or text", s.LogFormat)
	}
	s.Grace = 15 * time.Second
	if c.ShutdownGrace != "" {
		d, err := time.ParseDuration(c.ShutdownGrace)
		if err != nil || d < 0 {
			return nil, fieldErr("shutdown_grace", "%q is not a duration", c.ShutdownGrace)
		}
		s.Grace = d
	}
	return s, nil
}

func (c *Config) validateStore(s *Settings) error {
	st := &s.Store
	st.Type = c.Store.Type
	if st.Type == "" {
		st.Type = "memory"
	}
	switch st.Type {
	case "memory":
	case "redis":
		r := c.Store.Redis
		if r.URL == "" && r.Sentinel.MasterName == "" && len(r.ClusterAddrs) == 0 {
			return fieldErr("store.redis.url", "required when store.type is redis (or sentinel, or cluster_addrs)")
		}
		if len(r.ClusterAddrs) > 0 && r.HashTag == "" {
			return fieldErr("store.redis.hash_tag", "required with cluster_addrs: a reservation's keys must share one slot")
		}
		if len(r.ClusterAddrs) > 0 && r.Sentinel.MasterName != "" {
			return fieldErr("store.redis.cluster_addrs", "cannot be combined with sentinel")
		}
		if r.URL != "" && !strings.HasPrefix(r.URL, "redis://") && !strings.HasPrefix(r.URL, "rediss://") && !strings.HasPrefix(r.URL, "unix://") {
			return fieldErr("store.redis.url", "%q must start with redis://, rediss:// or unix://", r.URL)
		}
		if r.Sentinel.MasterName != "" && len(r.Sentinel.Addrs) == 0 {
			return fieldErr("store.redis.sentinel.addrs", "required with sentinel.master_name")
		}
		if r.PoolSize < 0 {
			return fieldErr("store.redis.pool_size", "must not be negative")
		}
		if r.MinIdleConns < 0 {
			return fieldErr("store.redis.min_idle_conns", "must not be negative")
		}
		if strings.ContainsAny(r.HashTag, "{}") {
			return fieldErr("store.redis.hash_tag", "must not contain { or }")
		}
		st.URL, st.PoolSize, st.MinIdleConns, st.HashTag, st.Sentinel = r.URL, r.PoolSize, r.MinIdleConns, r.HashTag, r.Sentinel
		st.ClusterAddrs, st.AllowEviction = r.ClusterAddrs, r.AllowEviction
	default:
		return fieldErr("store.type", "%q is not memory or redis", st.Type)
	}
	st.Timeout = 50 * time.Millisecond
	if t := c.Store.Redis.Timeout; t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return fieldErr("store.redis.timeout", "%q is not a positive duration", t)
		}
		st.Timeout = d
	}
	return nil
}

func (c *Config) validateIdentity(s *Settings) error {
	names := make([]string, 0, len(c.Identity.Attributes))
	for name := range c.Identity.Attributes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		a := c.Identity.Attributes[name]
		field := "identity.attributes." + name
		if slices.Contains(reservedAttributes, name) {
			return fieldErr(field, "%q is set by tokenwarden itself and cannot come from identity", name)
		}
		if (a.Header == "") == (a.Metadata == nil) {
			return fieldErr(field, "needs exactly one source: header or metadata")
		}
		src := extproc.AttributeSource{Name: name}
		if a.Header != "" {
			if !validHeaderName(a.Header) {
				return fieldErr(field+".header", "%q is not a valid header name", a.Header)
			}
			src.Header = strings.ToLower(a.Header)
		} else {
			m := a.Metadata
			if m.Namespace == "" || m.Key == "" {
				return fieldErr(field+".metadata", "needs namespace and key")
			}
			src.Metadata = &extproc.MetadataSource{Namespace: m.Namespace, Key: m.Key, Path: m.Path}
		}
		if a.Default != nil {
			src.Default, src.HasDefault = *a.Default, true
		}
		s.Identity.Attributes = append(s.Identity.Attributes, src)
	}
	for i, name := range c.Identity.Required {
		if _, ok := c.Identity.Attributes[name]; !ok {
			return fieldErr(fmt.Sprintf("identity.required[%d]", i), "%q is not an attribute under identity.attributes", name)
		}
	}
	s.Identity.Required = c.Identity.Required
	return nil
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (c *Config) validateEstimation(s *Settings) error {
	e := c.Estimation
	s.Tokenizer = e.Tokenizer
	if s.Tokenizer == "" {
		s.Tokenizer = "approximate"
	}
	if s.Tokenizer != "approximate" && s.Tokenizer != "exact" {
		return fieldErr("estimation.tokenizer", "%q is not approximate or exact", s.Tokenizer)
	}
	s.CharsPerToken = e.CharsPerToken
	if s.CharsPerToken == 0 {
		s.CharsPerToken = 4
	}
	if s.CharsPerToken < 0.5 || s.CharsPerToken > 20 {
		return fieldErr("estimation.chars_per_token", "%v is outside 0.5..20", e.CharsPerToken)
	}
	s.Estimation = tokenizer.Config{Mode: tokenizer.Mode(s.Tokenizer), CharsPerToken: s.CharsPerToken, ExactMaxBytes: e.ExactMaxBytes}
	for i, r := range e.PerModel {
		s.Estimation.PerModel = append(s.Estimation.PerModel, tokenizer.Rule{
			Pattern: r.Pattern, Mode: tokenizer.Mode(r.Tokenizer), CharsPerToken: r.CharsPerToken})
		if r.Pattern == "" {
			return fieldErr(fmt.Sprintf("estimation.per_model[%d].pattern", i), "required")
		}
	}
	if d := e.DefaultImage; d != nil {
		s.Estimation.DefaultImageWidth, s.Estimation.DefaultImageHeight = d.Width, d.Height
	}
	if _, err := tokenizer.New(s.Estimation); err != nil {
		// The tokenizer names its field (PerModel[1].CharsPerToken);
		// say where that is in the file.
		return fieldErr("estimation", "%v", err)
	}
	s.OutputCap = e.DefaultOutputCap
	if s.OutputCap == 0 {
		s.OutputCap = 4096
	}
	if s.OutputCap < 1 || s.OutputCap > math.MaxInt32 {
		return fieldErr("estimation.default_output_cap", "%d is outside 1..%d", e.DefaultOutputCap, math.MaxInt32)
	}
	s.InjectCap = e.InjectOutputCap == nil || *e.InjectOutputCap
	s.InjectUsage = e.InjectStreamUsage == nil || *e.InjectStreamUsage
	return nil
}

func (c *Config) validatePrices(s *Settings) error {
	s.Prices = make(accounting.Prices, len(c.Models))
	for model, p := range c.Models {
		for name, v := range map[string]float64{"input": p.Input, "cached_input": p.CachedInput,
			"cache_write": p.CacheWrite, "cache_write_1h": p.CacheWrite1h, "output": p.Output} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fieldErr("models."+model+"."+name, "%v is not a price", v)
			}
		}
		s.Prices[model] = accounting.Price(p)
	}
	return nil
}

func (c *Config) validateLimits(s *Settings) error {
	seen := map[string]bool{}
	for i, lc := range c.Limits {
		field := fmt.Sprintf("limits[%d]", i)
		if !limitName.MatchString(lc.Name) {
			return fieldErr(field+".name", "%q must be 1-64 letters, digits, '_', '.' or '-'", lc.Name)
		}
		if seen[lc.Name] {
			return fieldErr(field+".name", "%q is used by another limit", lc.Name)
		}
		seen[lc.Name] = true
		l := accounting.Limit{Name: lc.Name, Scope: lc.Scope, Match: lc.Match}
		var err error
		if l.Dimension, err = accounting.ParseDimension(lc.Dimension); err != nil {
			return fieldErr(field+".dimension", "%v", err)
		}
		alg := lc.Algorithm
		if alg == "" {
			alg = "sliding_window"
		}
		if l.Algorithm, err = accounting.ParseAlgorithm(alg); err != nil {
			return fieldErr(field+".algorithm", "%v", err)
		}
		for j, attr := range lc.Scope {
			if !c.knownAttribute(attr) {
				return fieldErr(fmt.Sprintf("%s.scope[%d]", field, j), "%q has no source under identity.attributes (and is not model or api)", attr)
			}
			if slices.Contains(lc.Scope[:j], attr) {
				return fieldErr(fmt.Sprintf("%s.scope[%d]", field, j), "%q is listed twice", attr)
			}
		}
		for attr := range lc.Match {
			if !c.knownAttribute(attr) {
				return fieldErr(field+".match."+attr, "%q has no source under identity.attributes (and is not model or api)", attr)
			}
		}
		if l.Limit, err = amount(l.Dimension, lc.Limit); err != nil || l.Limit <= 0 {
			if err == nil {
				err = errors.New("must be positive")
			}
			return fieldErr(field+".limit", "%v", err)
		}
		if lc.Burst != 0 {
			if l.Algorithm != accounting.TokenBucket {
				return fieldErr(field+".burst", "only a token_bucket has a burst")
			}
			if l.Burst, err = amount(l.Dimension, lc.Burst); err != nil || l.Burst <= 0 {
				if err == nil {
					err = errors.New("must be positive")
				}
				return fieldErr(field+".burst", "%v", err)
			}
		}
		if l.Window, l.Calendar, err = parseWindow(lc.Window); err != nil {
			return fieldErr(field+".window", "%v", err)
		}
		if l.Calendar == accounting.CalendarMonth && l.Algorithm != accounting.FixedWindow {
			return fieldErr(field+".window", "a calendar month needs algorithm fixed_window")
		}
		switch lc.OnStoreError {
		case "":
			// Money limits fail closed; a request count protects servers,
			// not the bill, and fails open.
			if l.Dimension == accounting.Requests {
				l.OnStoreError = accounting.FailOpen
			}
		case "deny":
		case "allow":
			l.OnStoreError = accounting.FailOpen
		default:
			return fieldErr(field+".on_store_error", "%q is not deny or allow", lc.OnStoreError)
		}
		if l.Dimension == accounting.Cost {
			// A limit matched to one model needs that model's price (or
			// the default); any other may meet every model.
			model, one := lc.Match["model"]
			if _, ok := s.Prices.Lookup(model); !ok || (!one && !hasDefault(s.Prices)) {
				return fieldErr(field, "a cost limit needs a price under models for %s (or a default entry)", describeModel(model))
			}
		}
		if err := l.Validate(); err != nil {
			return fieldErr(field, "%v", err)
		}
		s.Limits = append(s.Limits, l)
	}
	return nil
}

func (c *Config) validateSettlement(s *Settings) error {
	if p := c.Settlement.HiddenReasoningModels; p != nil {
		s.HiddenReasoning = append([]string{}, *p...)
		for i, pat := range *p {
			if pat == "" {
				return fieldErr(fmt.Sprintf("settlement.hidden_reasoning_models[%d]", i), "must not be empty")
			}
		}
	}
	switch c.Settlement.Background {
	case "", "reserve":
	case "refuse":
		s.RefuseBackground = true
	default:
		return fieldErr("settlement.background", "%q is not reserve or refuse", c.Settlement.Background)
	}
	for d, m := range c.Azure.Deployments {
		if d == "" || m == "" || strings.Contains(d, "/") {
			return fieldErr("azure.deployments."+d, "needs a deployment name (no '/') and a model")
		}
	}
	s.AzureDeployments = c.Azure.Deployments
	return nil
}

func hasDefault(p accounting.Prices) bool { _, ok := p[accounting.DefaultModel]; return ok }

func describeModel(m string) string {
	if m == "" {
		return "every model"
	}
	return "model " + strconv.Quote(m)
}

func (c *Config) knownAttribute(name string) bool {
	if slices.Contains(reservedAttributes, name) {
		return true
	}
	_, ok := c.Identity.Attributes[name]
	return ok
}

// amount converts a configured limit to the dimension's integer unit:
// cost in USD becomes micro-dollars; requests and tokens must be whole.
func amount(d accounting.Dimension, v float64) (int64, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e15 {
		return 0, fmt.Errorf("%v is out of range", v)
	}
	if d == accounting.Cost {
		return int64(math.Round(v * 1e6)), nil
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%v must be a whole number of %s", v, d)
	}
	return int64(v), nil
}

// parseWindow parses a window: a Go duration, "Nd" days, or the calendar
// names day (24h from midnight UTC) and month.
func parseWindow(s string) (time.Duration, accounting.Calendar, error) {
	switch s {
	case "":
		return 0, 0, errors.New("required")
	case "day":
		return 24 * time.Hour, accounting.NoCalendar, nil
	case "month":
		return 0, accounting.CalendarMonth, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, 0, fmt.Errorf("%q is not a duration", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, 0, fmt.Errorf("%q is not a duration (e.g. 1m, 1h, 7d, day, month)", s)
		}
	}
	if d < time.Second || d > 31*24*time.Hour {
		return 0, 0, fmt.Errorf("%s is outside 1s..31d", s)
	}
	return d, accounting.NoCalendar, nil
}
