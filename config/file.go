package config

// file is the YAML file as written: every key it may have, with the
// types its values are read as. Parse turns it into a [Config].
type file struct {
	Listen              string               `yaml:"listen"`
	Admin               string               `yaml:"admin"`
	ShutdownGrace       string               `yaml:"shutdown_grace"`
	AdminPprof          bool                 `yaml:"admin_pprof"`
	AdminTokenFile      string               `yaml:"admin_token_file"`
	StripAcceptEncoding bool                 `yaml:"strip_accept_encoding"`
	OtherPaths          string               `yaml:"other_paths"`
	UnmeteredAPIs       map[string]string    `yaml:"unmetered_apis"`
	Log                 logFile              `yaml:"log"`
	Store               storeFile            `yaml:"store"`
	Identity            identityFile         `yaml:"identity"`
	Estimation          estimationFile       `yaml:"estimation"`
	Models              map[string]priceFile `yaml:"models"`
	Limits              []limitFile          `yaml:"limits"`
	Settlement          settlementFile       `yaml:"settlement"`
	Azure               azureFile            `yaml:"azure"`
	ServiceTiers        map[string]float64   `yaml:"service_tiers"`
	RateLimitHeaders    rateLimitHeadersFile `yaml:"rate_limit_headers"`
	RequestBytes        requestBytesFile     `yaml:"request_bytes"`
	Reload              reloadFile           `yaml:"reload"`
	Tracing             *tracingFile         `yaml:"tracing"`
	Regions             *regionsFile         `yaml:"regions"`
}

// rateLimitHeadersFile switches the rate-limit header families besides
// the x-ratelimit-* trio.
type rateLimitHeadersFile struct {
	// IETF adds RateLimit-Policy and RateLimit; off unless set.
	IETF bool `yaml:"ietf"`
	// Anthropic sets anthropic-ratelimit-* on Anthropic routes; on unless
	// set to false.
	Anthropic *bool `yaml:"anthropic"`
	// ShouldRetryMax is the longest wait a 429 invites a retry after (a
	// duration, or "off"); default 2m.
	ShouldRetryMax string `yaml:"should_retry_max"`
}

type logFile struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

type storeFile struct {
	Type  string    `yaml:"type"`
	Redis redisFile `yaml:"redis"`
}

type redisFile struct {
	URL           string       `yaml:"url"`
	Timeout       string       `yaml:"timeout"`
	PoolSize      int          `yaml:"pool_size"`
	MinIdleConns  int          `yaml:"min_idle_conns"`
	HashTag       string       `yaml:"hash_tag"`
	ShardBy       string       `yaml:"shard_by"`
	ClusterAddrs  []string     `yaml:"cluster_addrs"`
	Sentinel      sentinelFile `yaml:"sentinel"`
	AllowEviction bool         `yaml:"allow_eviction"`
}

type sentinelFile struct {
	MasterName string   `yaml:"master_name"`
	Addrs      []string `yaml:"addrs"`
	Password   string   `yaml:"password"`
}

type identityFile struct {
	Attributes map[string]attributeFile `yaml:"attributes"`
	Required   []string                 `yaml:"required"`
}

type attributeFile struct {
	Header         string        `yaml:"header"`
	Metadata       *metadataFile `yaml:"metadata"`
	EnvoyAttribute string        `yaml:"envoy_attribute"`
	Default        *string       `yaml:"default"`
}

type metadataFile struct {
	Namespace string   `yaml:"namespace"`
	Key       string   `yaml:"key"`
	Path      []string `yaml:"path"`
}

type estimationFile struct {
	Tokenizer         string          `yaml:"tokenizer"`
	CharsPerToken     float64         `yaml:"chars_per_token"`
	PerModel          []modelRuleFile `yaml:"per_model"`
	ExactMaxBytes     int             `yaml:"exact_max_bytes"`
	DefaultImage      *imageSizeFile  `yaml:"default_image"`
	DefaultOutputCap  int64           `yaml:"default_output_cap"`
	InjectOutputCap   *bool           `yaml:"inject_output_cap"`
	InjectStreamUsage *bool           `yaml:"inject_stream_usage"`
	LearnedOutput     learnedFile     `yaml:"learned_output"`
}

// learnedFile turns on learned output estimates (off unless enabled).
type learnedFile struct {
	Enabled      bool     `yaml:"enabled"`
	Quantile     float64  `yaml:"quantile"`
	MinSamples   int64    `yaml:"min_samples"`
	DecaySamples int64    `yaml:"decay_samples"`
	Floor        int64    `yaml:"floor"`
	MaxKeys      int      `yaml:"max_keys"`
	Scope        []string `yaml:"scope"`
}

type modelRuleFile struct {
	Pattern       string  `yaml:"pattern"`
	Tokenizer     string  `yaml:"tokenizer"`
	CharsPerToken float64 `yaml:"chars_per_token"`
}

type imageSizeFile struct {
	Width  int `yaml:"width"`
	Height int `yaml:"height"`
}

type priceFile struct {
	Input        float64 `yaml:"input"`
	CachedInput  float64 `yaml:"cached_input"`
	CacheWrite   float64 `yaml:"cache_write"`
	CacheWrite1h float64 `yaml:"cache_write_1h"`
	AudioInput   float64 `yaml:"audio_input"`
	Output       float64 `yaml:"output"`
	AudioOutput  float64 `yaml:"audio_output"`
	ImageOutput  float64 `yaml:"image_output"`
}

type limitFile struct {
	Name         string            `yaml:"name"`
	Dimension    string            `yaml:"dimension"`
	Scope        []string          `yaml:"scope"`
	Match        map[string]string `yaml:"match"`
	Algorithm    string            `yaml:"algorithm"`
	Limit        float64           `yaml:"limit"`
	Window       string            `yaml:"window"`
	Burst        float64           `yaml:"burst"`
	OnStoreError string            `yaml:"on_store_error"`
	Mode         string            `yaml:"mode"`
	TimeZone     string            `yaml:"time_zone"`
	LimitFrom    *limitFromFile    `yaml:"limit_from"`
	Lease        string            `yaml:"lease"`
	MaxDuration  string            `yaml:"max_duration"`
	ReserveFor   *reserveForFile   `yaml:"reserve_for"`
	OnExhausted  *onExhaustedFile  `yaml:"on_exhausted"`
	Across       bool              `yaml:"across_regions"`
}

// reserveForFile keeps a share of a limit for the requests whose
// attribute has the value.
type reserveForFile struct {
	Attribute string  `yaml:"attribute"`
	Value     string  `yaml:"value"`
	Share     float64 `yaml:"share"`
}

// limitFromFile takes a limit's value from an identity attribute; the
// limit's own limit is the value without one.
type limitFromFile struct {
	Attribute string  `yaml:"attribute"`
	Ceiling   float64 `yaml:"ceiling"`
}

type settlementFile struct {
	// HiddenReasoningModels: unset (nil) means the built-in list, []
	// means none.
	HiddenReasoningModels *[]string        `yaml:"hidden_reasoning_models"`
	Background            string           `yaml:"background"`
	ContextWindows        map[string]int64 `yaml:"context_windows"`
}

type azureFile struct {
	Deployments map[string]string `yaml:"deployments"`
}
