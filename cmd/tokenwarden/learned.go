package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/tokenwarden/tokenwarden/extproc"
)

// learnedSummary is check-config's line on learned output estimates.
func learnedSummary(o extproc.LearnedOutput) string {
	if !o.Enabled {
		return "learned output estimates: off (every request reserves its whole output cap)"
	}
	key := "model+api"
	if len(o.Scope) > 0 {
		key += "+" + strings.Join(o.Scope, "+")
	}
	minSamples := cmp.Or(o.MinSamples, extproc.DefaultLearnedMinSamples)
	return fmt.Sprintf("learned output estimates: on: reserve p%g of the last ~%d completions per %s once %d are seen, at least %d tokens per choice, at most %d estimates per replica; "+
		"the cap is still sent and a longer completion charged in full, so a window can be overspent by up to (requests in flight) × (cap − learned)",
		100*cmp.Or(o.Quantile, extproc.DefaultLearnedQuantile), cmp.Or(o.DecaySamples, max(extproc.DefaultLearnedDecaySamples, minSamples)), key,
		minSamples, cmp.Or(o.Floor, extproc.DefaultLearnedFloor), cmp.Or(o.MaxKeys, extproc.DefaultLearnedMaxKeys))
}

// printLearned writes the estimate's learned figure beside the cap's.
func printLearned(w io.Writer, e *extproc.Explanation, l *extproc.LearnedExplanation) {
	scoped := ""
	if l.Scoped {
		scoped = " without scope attributes"
	}
	if l.OutputTokens == 0 {
		fmt.Fprintf(w, "learned output: none yet (%d of %d completions of %s on %s%s): the cap is reserved; each replica learns from the completions it settles, and this command's server has settled none\n",
			l.Samples, l.MinSamples, e.Model, e.API, scoped)
		return
	}
	fmt.Fprintf(w, "learned output: p%g of %d completions%s = %d per choice; reserving %d output tokens instead of the cap's %d (the cap is still sent; a longer completion is charged in full)\n",
		100*l.Quantile, l.Samples, scoped, l.OutputTokens, e.Estimate.OutputTokens, l.CapEstimate.OutputTokens)
}
