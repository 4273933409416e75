package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// runEstimate implements "tokenwarden estimate": it reads a request body
// (a file, or stdin for "-" or none) and prints how the server meters it
// — the API, the model, the input part by part, the output cap, the
// reservation and its cost — so that an operator can see where a
// surprising 429 came from. It is the server's own reading: the server's
// routing and wire-format parsers, configured from the same config file
// (Server.Explain), not a second implementation of them.
//
// There are no flags for the tokenizer, the default output cap or
// prices: the config says how the server estimates, and a figure from
// other settings would be one no server reserves. Nor is there one for
// the model: the server takes it from the body, or from the path (Gemini,
// Bedrock, an Azure deployment), and -path sets the latter.
func runEstimate(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenwarden estimate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tokenwarden estimate [-config FILE] [-path PATH] [FILE|-]\n\n"+
			"Prints what the server reserves for a request body sent to PATH, part by part,\n"+
			"as the server configured by FILE reads it.")
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "the server's config `file` (default: the embedded example config)")
	path := fs.String("path", "/v1/chat/completions", "the request's `path`: it picks the API, and names the model for Gemini, Bedrock and Azure OpenAI")
	if len(args) > 0 && isHelp(args[0]) {
		fs.SetOutput(stdout)
		fs.Usage()
		return nil
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("estimate: one body at a time, got %d files", fs.NArg())
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	counter, err := tokenizer.New(cfg.Tokenizer)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	srv, err := estimateServer(cfg, counter)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	body, err := readEstimateBody(fs.Arg(0), stdin)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	e, err := srv.Explain(*path, body)
	var refused *extproc.RefusedError
	if errors.As(err, &refused) {
		return fmt.Errorf("estimate: the server answers %w", err)
	}
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	printExplanation(stdout, *path, e, counter, cfg.Accounting.Prices)
	return nil
}

// estimateServer returns the Server serve would start for cfg (newServer,
// the one place both get theirs from), on a memory store: Explain never
// calls the limiter, so estimating touches no store.
func estimateServer(cfg *config.Config, counter extproc.TokenCounter) (*extproc.Server, error) {
	c := *cfg
	c.Server.Counter = counter
	// Nor does it lease: no region keeps the limits kept across regions.
	c.Accounting.Limits = slices.Clone(c.Accounting.Limits)
	for i := range c.Accounting.Limits {
		c.Accounting.Limits[i].AcrossRegions = false
	}
	srv, _, err := newServer(&c, memstore.New(memstore.Options{}), nil, nil)
	return srv, err
}

// readEstimateBody reads the body from the file name, or from stdin for
// "" or "-". It reads one byte more than the server accepts, so that the
// server's own check refuses a body too large.
func readEstimateBody(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return io.ReadAll(io.LimitReader(r, extproc.MaxMessageBytes+1))
}

// printExplanation writes e, the server's reading of a request to path,
// as aligned text, priced from prices.
func printExplanation(w io.Writer, path string, e *extproc.Explanation, counter *tokenizer.Counter, prices accounting.Prices) {
	switch {
	case e.Passes:
		fmt.Fprintf(w, "%s is not an LLM API path: the server passes the request untouched and counts it nowhere (other_paths: pass)\n", path)
		return
	case e.Unmetered:
		fmt.Fprintf(w, "api %s cannot be metered, and the config allows it: the server reads no body and counts the request on the requests dimension only (unmetered_apis)\n", e.API)
		return
	case e.API == "":
		fmt.Fprintf(w, "%s is not an LLM API path: the server reads no body and counts the request on the requests dimension only (other_paths: count)\n", path)
		return
	case !e.Metered:
		fmt.Fprintf(w, "api %s: a request without a body is counted on the requests dimension only\n", e.API)
		return
	}
	model := e.Model
	if e.FromDeployment {
		model += " (the Azure deployment's)"
	}
	stream := ""
	if e.Stream {
		stream = ", streamed"
	}
	m := counter.Method(e.Model)
	how := fmt.Sprintf("approximate (%s table, ×%.2f)", m.Profile, m.Scale)
	if m.Encoding != "" {
		how = "exact (" + m.Encoding + "; long unbroken stretches approximated)"
	}
	fmt.Fprintf(w, "api %s%s, model %s, tokenizer %s\n\n", e.API, stream, model, how)

	width := len("input total")
	for _, p := range e.Parts {
		width = max(width, len(p.Name))
	}
	fmt.Fprintf(w, "%-*s  %8s\n", width, "input", "tokens")
	for _, p := range e.Parts {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%-*s  %8d  %s", width, p.Name, p.Tokens, p.Detail), " "))
	}
	fmt.Fprintf(w, "%-*s  %8d\n\n", width, "input total", e.InputTokens)

	if e.CapSource == "" {
		fmt.Fprintln(w, "output: none")
	} else {
		source := e.CapSource
		if e.CapInjected {
			source += ", added to the body"
		}
		fmt.Fprintf(w, "output cap: %d (%s) × %d %s = %d\n", e.OutputCap, source, e.Choices, plural(e.Choices, "choice"), e.Estimate.OutputTokens)
	}
	if l := e.Learned; l != nil {
		printLearned(w, e, l)
	}
	fmt.Fprintf(w, "reservation: %d tokens\n", e.Estimate.Total())
	price, ok := prices.Lookup(e.Model)
	switch {
	case !ok:
		fmt.Fprintf(w, "cost: no price for %s under models, nor a default: a cost limit refuses it\n", e.Model)
	default:
		entry := e.Model
		if _, own := prices[e.Model]; !own {
			entry = accounting.DefaultModel
		}
		fmt.Fprintf(w, "cost: %d × $%.2f/M + %d × $%.2f/M = $%.6f (models.%s)\n", e.Estimate.InputTokens, price.Input,
			e.Estimate.OutputTokens, price.Output, float64(price.EstimateCost(e.Estimate))/1e6, entry)
	}
	for _, n := range e.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// plural returns noun, with an s unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
