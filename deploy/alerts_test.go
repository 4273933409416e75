package deploy

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// alertsFile is the Prometheus rule file.
const alertsFile = "prometheus/alerts.yaml"

// ruleFile is the part of Prometheus's rule file format the alerts use;
// decoding is strict, so a misspelt key fails.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// loadRules decodes a rule file strictly.
func loadRules(t *testing.T, data []byte) ruleFile {
	t.Helper()
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("decoding rules: %v", err)
	}
	return rf
}

var (
	promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	labelRef     = regexp.MustCompile(`\$labels\.([A-Za-z_][A-Za-z0-9_]*)`)
	byClause     = regexp.MustCompile(`\bby \(([^)]*)\)`)
)

// TestAlertRules checks the rule file: its shape, each alert's fields, each
// expression against the exported metrics, and that the annotations name
// only labels the expression keeps.
func TestAlertRules(t *testing.T) {
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	rf := loadRules(t, data)
	if len(rf.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	c := newChecker(t)
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: want a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				if !regexp.MustCompile(`^Tokenwarden[A-Z][A-Za-z]+$`).MatchString(r.Alert) {
					t.Errorf("alert name %q: want Tokenwarden followed by CamelCase", r.Alert)
				}
				if seen[r.Alert] {
					t.Errorf("alert %s defined twice", r.Alert)
				}
				seen[r.Alert] = true
				if r.For != "" && !promDuration.MatchString(r.For) {
					t.Errorf("for %q is not a Prometheus duration", r.For)
				}
				if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
					t.Errorf("severity %q: want critical or warning", sev)
				}
				if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("annotations %v: want a summary and a description", r.Annotations)
				}
				c.checkQuery(t, r.Expr)
				// Labels an annotation uses must survive the expression's
				// aggregation (by (…)), or they render empty.
				var kept []string
				for _, m := range byClause.FindAllStringSubmatch(r.Expr, -1) {
					for _, l := range strings.Split(m[1], ",") {
						kept = append(kept, strings.TrimSpace(l))
					}
				}
				aggregated := len(kept) > 0 || strings.Contains(r.Expr, "sum(")
				for _, a := range r.Annotations {
					for _, m := range labelRef.FindAllStringSubmatch(a, -1) {
						if aggregated && !slices.Contains(kept, m[1]) {
							t.Errorf("an annotation uses $labels.%s, which the expression aggregates away (keeps %v)", m[1], kept)
						}
					}
				}
			})
		}
	}
}

// TestAlertsDocumented checks the operations guide explains every alert.
func TestAlertsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range loadRules(t, data).Groups {
		for _, r := range g.Rules {
			if !strings.Contains(string(doc), "`"+r.Alert+"`") {
				t.Errorf("docs/operations.md does not explain %s", r.Alert)
			}
		}
	}
}
