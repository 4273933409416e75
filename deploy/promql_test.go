package deploy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// There is no PromQL parser in the module graph, so this file checks
// queries with a small lexer: brackets balance, every identifier is a
// function, a keyword or an exported series, every label a matcher or a
// grouping clause names belongs to the series the query selects, and a
// value matched on an enumerated label is one the server writes. The
// dashboard and the alerts keep to simple PromQL so that this stays
// enough.

// functions are the PromQL functions and aggregations the queries may use.
var functions = []string{
	"sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile",
	"rate", "irate", "increase", "delta", "deriv",
	"histogram_quantile", "abs", "clamp_min", "clamp_max", "absent", "vector", "scalar",
}

// keywords are PromQL's operator keywords.
var keywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}

// grafanaVars are the variables Grafana substitutes in a query.
var grafanaVars = regexp.MustCompile(`\$(__rate_interval|__interval|__range|job|datasource)\b`)

type token struct {
	kind string // ident, string, number, duration, punct
	text string
}

var tokenRE = regexp.MustCompile(`\s+|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\[[^\]]*\]|[A-Za-z_:][A-Za-z0-9_:]*|[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|=~|!~|!=|==|>=|<=|[-+*/%^(){},=<>]`)

// lex splits a query into tokens; an unknown character is an error.
func lex(q string) ([]token, error) {
	var out []token
	for len(q) > 0 {
		loc := tokenRE.FindStringIndex(q)
		if loc == nil || loc[0] != 0 {
			return nil, fmt.Errorf("unexpected %q", q)
		}
		s := q[:loc[1]]
		q = q[loc[1]:]
		switch {
		case strings.TrimSpace(s) == "":
		case s[0] == '"' || s[0] == '\'':
			out = append(out, token{"string", s[1 : len(s)-1]})
		case s[0] == '[':
			out = append(out, token{"duration", s[1 : len(s)-1]})
		case s[0] >= '0' && s[0] <= '9':
			out = append(out, token{"number", s})
		case s[0] == '_' || s[0] == ':' || s[0] >= 'A' && s[0] <= 'z' && s[0] != '^':
			out = append(out, token{"ident", s})
		default:
			out = append(out, token{"punct", s})
		}
	}
	return out, nil
}

var durationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

// reporter is where checkQuery reports: a *testing.T, or a recorder.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// recorder collects errors, for tests of the checker itself.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// checker checks queries against what the server exports.
type checker struct {
	exp     map[string]series
	sources string // the Go sources that write label values
}

func newChecker(t *testing.T) *checker {
	return &checker{exp: exported(t), sources: serverSources(t)}
}

// checkQuery checks one query and returns the series it selects.
func (c *checker) checkQuery(t reporter, q string) []string {
	t.Helper()
	exp := c.exp
	toks, err := lex(q)
	if err != nil {
		t.Errorf("query %q: %v", q, err)
		return nil
	}
	depth := map[string]int{}
	pairs := map[string]string{")": "(", "}": "{"}
	var stack []string
	var selected []string
	var grouping []string
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		next := func(k int) token {
			if i+k < len(toks) {
				return toks[i+k]
			}
			return token{}
		}
		switch tk.kind {
		case "punct":
			switch tk.text {
			case "(", "{":
				stack = append(stack, tk.text)
				depth[tk.text]++
			case ")", "}":
				if len(stack) == 0 || stack[len(stack)-1] != pairs[tk.text] {
					t.Errorf("query %q: unbalanced %q", q, tk.text)
					return nil
				}
				stack = stack[:len(stack)-1]
			}
		case "duration":
			d := grafanaVars.ReplaceAllString(tk.text, "5m")
			if !durationRE.MatchString(d) {
				t.Errorf("query %q: range [%s] is not a duration", q, tk.text)
			}
		case "ident":
			switch {
			case slices.Contains(keywords, tk.text):
				if slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, tk.text) && next(1).text == "(" {
					j := i + 2
					for ; j < len(toks) && toks[j].text != ")"; j++ {
						if toks[j].kind == "ident" {
							grouping = append(grouping, toks[j].text)
						}
					}
					i = j
				}
			case slices.Contains(functions, tk.text) && (next(1).text == "by" || next(1).text == "without"):
				// An aggregation with its grouping first: sum by (le) (…).
			case next(1).text == "(":
				if !slices.Contains(functions, tk.text) {
					t.Errorf("query %q: %s( is not a function this check knows", q, tk.text)
				}
			default:
				s, ok := exp[tk.text]
				if !ok {
					t.Errorf("query %q: %s is not a metric tokenwarden exports", q, tk.text)
					continue
				}
				selected = append(selected, tk.text)
				if next(1).text != "{" {
					continue
				}
				j := i + 2
				for ; j < len(toks) && toks[j].text != "}"; j += 4 {
					label, op, val := toks[j], toks[j+1], toks[j+2]
					if label.kind != "ident" || op.kind != "punct" || val.kind != "string" {
						t.Errorf("query %q: a matcher of %s is not label op \"value\"", q, tk.text)
						break
					}
					if !s.labels[label.text] {
						t.Errorf("query %q: %s has no label %s", q, tk.text, label.text)
					}
					if slices.Contains(enumeratedLabels, label.text) && !strings.Contains(val.text, "$") {
						for _, v := range strings.Split(val.text, "|") {
							if !strings.Contains(c.sources, `"`+v+`"`) {
								t.Errorf("query %q: %s=%q: the server never writes %q", q, label.text, val.text, v)
							}
						}
					}
					if toks[j+3].text == "}" {
						j += 3
						break
					}
				}
				i = j
			}
		}
	}
	if len(stack) != 0 {
		t.Errorf("query %q: %d brackets left open", q, len(stack))
	}
	for _, l := range grouping {
		found := false
		for _, s := range selected {
			found = found || exp[s].labels[l]
		}
		if !found {
			t.Errorf("query %q: groups by %s, which none of %v has", q, l, selected)
		}
	}
	if len(selected) == 0 {
		t.Errorf("query %q selects no series", q)
	}
	return selected
}

// TestCheckQuery shows the checker passes plain queries and rejects each
// mistake it is for.
func TestCheckQuery(t *testing.T) {
	c := newChecker(t)
	good := []string{
		`sum by (outcome) (rate(tokenwarden_requests_total{job=~"$job"}[$__rate_interval]))`,
		`histogram_quantile(0.99, sum by (le) (rate(tokenwarden_decision_seconds_bucket[5m]))) > 0.1`,
		`up{job="tokenwarden"} == 0`,
		`sum(rate(tokenwarden_requests_total{outcome=~"rejected|never_fits"}[15m])) / sum(rate(tokenwarden_requests_total[15m])) > 0.25`,
	}
	for _, q := range good {
		rec := &recorder{}
		c.checkQuery(rec, q)
		if len(rec.errs) > 0 {
			t.Errorf("%q: got %v, want no error", q, rec.errs)
		}
	}
	bad := []struct{ name, query string }{
		{"unknown metric", `rate(tokenwarden_request_total[5m])`},
		{"a metric no longer exported", `rate(tokenwarden_decisions_total[5m])`},
		{"unknown label", `sum by (tenant) (rate(tokenwarden_requests_total[5m]))`},
		{"label of another metric", `tokenwarden_settlements_total{api="openai.chat"}`},
		{"value never written", `tokenwarden_settlements_total{outcome="loss"}`},
		{"unknown function", `rated(tokenwarden_requests_total[5m])`},
		{"unbalanced", `sum(rate(tokenwarden_requests_total[5m])`},
		{"bad range", `rate(tokenwarden_requests_total[five])`},
		{"histogram without _bucket", `rate(tokenwarden_decision_seconds[5m])`},
		{"no series", `vector(1)`},
	}
	for _, b := range bad {
		rec := &recorder{}
		c.checkQuery(rec, b.query)
		if len(rec.errs) == 0 {
			t.Errorf("%s: %q passed, want an error", b.name, b.query)
		}
	}
}
