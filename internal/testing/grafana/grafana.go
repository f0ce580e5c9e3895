// Package grafana reads the queries of a Grafana dashboard's panels, so a
// test can run each against a real Prometheus.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Query is one target of a panel, with the template variables replaced.
type Query struct {
	Panel, Expr string
}

// Controller reports whether the query reads flock-controller's metrics
// (the Flock members, controller-runtime's); the others read peer-finder's.
func (q Query) Controller() bool {
	return strings.Contains(q.Expr, "flock_member_") || strings.Contains(q.Expr, "controller_runtime_")
}

type panel struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

var variable = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// Queries returns every panel's queries in the dashboard file, each
// $var or ${var} replaced from vars. A panel (not a row) without a query,
// or a variable vars lacks, is an error.
func Queries(path string, vars map[string]string) ([]Query, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", path, err)
	}
	var out []Query
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type == "row" {
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if len(p.Targets) == 0 {
				return fmt.Errorf("dashboard %s: panel %q has no query", path, p.Title)
			}
			for _, t := range p.Targets {
				var missing string
				expr := variable.ReplaceAllStringFunc(t.Expr, func(v string) string {
					name := strings.Trim(v, "${}")
					val, ok := vars[name]
					if !ok {
						missing = name
					}
					return val
				})
				if missing != "" {
					return fmt.Errorf("dashboard %s: panel %q: no value for $%s", path, p.Title, missing)
				}
				out = append(out, Query{Panel: p.Title, Expr: expr})
			}
		}
		return nil
	}
	return out, walk(d.Panels)
}
