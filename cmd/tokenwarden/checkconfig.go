package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// runCheckConfig implements "tokenwarden check-config": it validates a
// file, reporting every problem, or prints what the server would run.
func runCheckConfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config `file` to check (default: the embedded default config)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tokenwarden check-config [-config FILE]\n\nValidates a config, listing every problem by its field, or prints what the server would run.")
		fs.PrintDefaults()
	}
	if len(args) > 0 && isHelp(args[0]) {
		fs.SetOutput(stdout)
		fs.Usage()
		return nil
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("check-config: unexpected argument %q (give the file with -config)", fs.Arg(0))
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if *configPath == "" {
		fmt.Fprintln(stdout, "(the embedded default config)")
	}
	printConfig(stdout, cfg)
	return nil
}

// printConfig prints the effective settings and limits, defaults filled
// in, for check-config.
func printConfig(w io.Writer, cfg *config.Config) {
	storeType := "memory"
	if cfg.Store.Redis != nil {
		storeType = "redis"
	}
	fmt.Fprintf(w, "config ok\nlisten %s, admin %s, store %s\n", cfg.Listen, cfg.Admin, storeType)
	printAdminAPI(w, cfg)
	fmt.Fprintln(w, reloadSummary(cfg))
	if cfg.Store.Redis != nil && cfg.Store.AllowEviction {
		fmt.Fprintln(w, "store.redis.allow_eviction: true: Redis's maxmemory-policy is not checked; a full Redis under any policy but noeviction resets budgets")
	}
	s := &cfg.Server
	fmt.Fprintf(w, "estimation: tokenizer %s, %.2f chars/token, default output cap %d, inject cap %v, inject stream usage %v\n",
		cmp.Or(cfg.Tokenizer.Mode, tokenizer.ModeApproximate), cmp.Or(cfg.Tokenizer.CharsPerToken, tokenizer.ReferenceCharsPerToken),
		cmp.Or(s.DefaultOutputCap, extproc.DefaultOutputCap), s.InjectOutputCap, s.InjectStreamUsage)
	fmt.Fprintln(w, learnedSummary(s.LearnedOutput))
	reasoning := s.HiddenReasoningModels
	if reasoning == nil {
		reasoning = extproc.DefaultHiddenReasoningModels
	}
	background := "reserve (charged their whole reservation)"
	if s.RefuseBackground {
		background = "refuse (400)"
	}
	fmt.Fprintf(w, "settlement without a usage report: hidden reasoning models [%s] keep their output cap; background responses: %s\n",
		strings.Join(reasoning, ", "), background)
	fmt.Fprintf(w, "rate-limit headers: x-ratelimit-*, IETF RateLimit %v, anthropic-ratelimit-* on Anthropic routes %v\n",
		s.IETFRateLimitHeaders, !s.NoAnthropicRateLimitHeaders)
	fmt.Fprintln(w, retryHintSummary(s.ShouldRetryMax))
	fmt.Fprintln(w, tracingSummary(cfg))
	tiers := s.ServiceTierFactors
	if tiers == nil {
		tiers = extproc.DefaultServiceTierFactors
	}
	for _, t := range slices.Sorted(maps.Keys(tiers)) {
		fmt.Fprintf(w, "service tier %s priced at %g× the model's price\n", t, tiers[t])
	}
	for _, d := range slices.Sorted(maps.Keys(s.AzureDeployments)) {
		fmt.Fprintf(w, "azure deployment %s serves model %s\n", d, s.AzureDeployments[d])
	}
	for _, a := range s.Identity.Attributes {
		src := "header " + a.Header
		if a.Metadata != nil {
			src = fmt.Sprintf("metadata %s/%s/%s", a.Metadata.Namespace, a.Metadata.Key, strings.Join(a.Metadata.Path, "/"))
		}
		if a.EnvoyAttribute != "" {
			src = "Envoy attribute " + a.EnvoyAttribute + " (the filter's request_attributes must list it)"
		}
		if a.HasDefault {
			src += fmt.Sprintf(" (default %q)", a.Default)
		}
		fmt.Fprintf(w, "identity %s from %s\n", a.Name, src)
	}
	fmt.Fprintf(w, "required: %s\n", strings.Join(s.Identity.Required, ", "))
	printPrices(w, cfg.Accounting.Prices, cfg.Accounting.Limits)
	limits := cfg.Accounting.Limits
	fmt.Fprintf(w, "%d limits:\n", len(limits))
	for _, l := range limits {
		scope := "global"
		if len(l.Scope) > 0 {
			scope = "per " + strings.Join(l.Scope, "+")
		}
		window := strings.TrimPrefix(humanWindow(l.Window), "1 ") // "per minute", "per 7 days"
		if name := l.CalendarName(); name != "" {
			window = name
		}
		line := fmt.Sprintf("  %-24s %s %s per %s, %s, %s", l.Name, formatLimit(l.Dimension, l.Limit), l.Dimension, window, scope, l.Algorithm)
		if l.Dimension == accounting.Concurrent {
			line = concurrentLine(&l, scope)
		}
		if l.Algorithm == accounting.Lifetime {
			line = lifetimeLine(&l, scope)
		}
		if l.Burst > 0 {
			line += fmt.Sprintf(" (burst %s)", formatLimit(l.Dimension, l.Burst))
		}
		if f := l.From; f != nil {
			line += fmt.Sprintf(", per request from attribute %s up to %s (%s when absent or unusable)",
				f.Attribute, formatLimit(l.Dimension, f.Ceiling), formatLimit(l.Dimension, l.Limit))
		}
		if l.ProviderLimit() {
			line += providerNote(&l)
		}
		if r := l.ReserveFor; r != nil {
			line += reserveForText(&l)
		}
		if len(l.Match) > 0 {
			line += ", when " + humanMatch(l.Match, slices.Sorted(maps.Keys(l.Match)))
		}
		line += waitNote(&l)
		if l.Mode == accounting.Shadow {
			line += ", shadow: counted, never enforced"
		} else {
			line += ", on store error " + l.OnStoreError.String()
		}
		line += exhaustedLine(&l)
		fmt.Fprintln(w, line)
	}
	if note := waitTimeoutNote(limits); note != "" {
		fmt.Fprintln(w, note)
	}
}

func formatLimit(d accounting.Dimension, v int64) string {
	if d == accounting.Cost {
		return fmt.Sprintf("$%d.%06d", v/1e6, v%1e6)
	}
	return fmt.Sprint(v)
}

// providerNote says how the provider's answers correct a provider limit:
// its remaining headers always, its 429s as far as the limit's algorithm
// lets a block go within the provider's retry-after.
func providerNote(l *accounting.Limit) string {
	most := humanWindow(accounting.MaxProviderBlock)
	block := "a provider 429 blocks it for the 429's retry-after, at most " + most
	switch l.Algorithm {
	case accounting.FixedWindow:
		block = "a provider 429 blocks it only when the window ends within the 429's retry-after (at most " + most + ")"
	case accounting.TokenBucket, accounting.Lifetime:
		block = "a provider 429 cannot block it in time, and does not (a sliding_window can)"
	}
	return ", provider limit (its remaining headers lower it; " + block + ")"
}
