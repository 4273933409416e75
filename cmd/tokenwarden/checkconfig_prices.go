package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// printPrices prints, for check-config, every price entry and which entry
// prices each model the prices name and each model a limit matches: the
// resolution a reservation and its settlement will make.
func printPrices(w io.Writer, prices accounting.Prices, limits []accounting.Limit) {
	if len(prices) == 0 {
		fmt.Fprintln(w, "prices: none (cost limits need one)")
		return
	}
	fmt.Fprintln(w, "prices (USD per million tokens; a model takes its own entry, else its family's, else the longest pattern's, else default):")
	keys := slices.Sorted(maps.Keys(prices))
	for _, k := range keys {
		fmt.Fprintf(w, "  %-24s %s\n", k, formatPrice(prices[k]))
	}
	// The models to resolve, each with what names it.
	named := map[string][]string{}
	for _, k := range keys {
		if k != accounting.DefaultModel && !strings.HasSuffix(k, "*") {
			named[k] = append(named[k], "models")
		}
	}
	for _, l := range limits {
		if m, ok := l.Match[accounting.AttributeModel]; ok {
			named[m] = append(named[m], "limit "+l.Name)
		}
	}
	if len(named) == 0 {
		return
	}
	fmt.Fprintln(w, "models priced:")
	for _, m := range slices.Sorted(maps.Keys(named)) {
		key, how := prices.Resolve(m)
		if how == accounting.NoPrice {
			fmt.Fprintf(w, "  %-24s (%s): no price\n", m, strings.Join(named[m], ", "))
			continue
		}
		fmt.Fprintf(w, "  %-24s (%s): %s, %s\n", m, strings.Join(named[m], ", "), key, how)
	}
}

// formatPrice lists a price's rates, derived ones marked as such.
func formatPrice(p accounting.Price) string {
	rate := func(v, derived float64, how string) string {
		if v == 0 {
			return fmt.Sprintf("%g (%s)", derived, how)
		}
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("input %g, cached input %s, cache write %s, cache write 1h %s, audio input %s, output %g, audio output %s, image output %s",
		p.Input, rate(p.CachedInput, p.Input, "input"), rate(p.CacheWrite, 1.25*p.Input, "1.25× input"),
		rate(p.CacheWrite1h, 2*p.Input, "2× input"), rate(p.AudioInput, p.Input, "input"), p.Output,
		rate(p.AudioOutput, p.Output, "output"), rate(p.ImageOutput, p.Output, "output"))
}
