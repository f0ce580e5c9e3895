// Package prometheus_test checks flock's alerting rules with promtool
// (unpacked from Debian's prometheus package by make cluster-build) and
// keeps prometheusrule.yaml in step with alerts.yaml.
package prometheus_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/localcluster"
)

var update = flag.Bool("update", false, "rewrite prometheusrule.yaml from alerts.yaml")

// promtool returns the unpacked promtool, or ends the test (need) when
// make cluster-build has not unpacked it.
func promtool(t *testing.T) string {
	t.Helper()
	root, err := localcluster.CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := localcluster.PrometheusBin(root, "promtool")
	if _, err := os.Stat(p); err != nil {
		need.Unavailable(t, "tool", "promtool not unpacked (make cluster-build): "+err.Error())
	}
	return p
}

// TestRules: promtool check rules accepts both files (the
// PrometheusRule's groups too) and test rules passes alerts_test.yaml:
// every alert fires after its for:, not before, and resolves.
func TestRules(t *testing.T) {
	tool := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
	spec := prometheusRule(t)["spec"]
	groups, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	f := t.TempDir() + "/prometheusrule-groups.yaml"
	if err := os.WriteFile(f, groups, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on prometheusrule.yaml's spec: %v\n%s", err, out)
	}
}

const ruleHeader = `# flock's alerting rules as a PrometheusRule (Prometheus Operator), for
# clusters whose Prometheus selects rules by object. Generated from
# alerts.yaml by "go test ./config/prometheus -update"; do not edit (a test
# fails when the two differ). Set its namespace, and the labels your
# Prometheus' ruleSelector wants, with kustomize or by hand.
`

// renderPrometheusRule is alerts.yaml's groups as a PrometheusRule.
func renderPrometheusRule(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.UnmarshalStrict(raw, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	out, err := yaml.Marshal(map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata":   map[string]any{"name": "flock", "labels": map[string]any{"app.kubernetes.io/name": "flock"}},
		"spec":       rules,
	})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(ruleHeader), out...)
}

func prometheusRule(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	return obj
}

// TestPrometheusRuleInStep: prometheusrule.yaml is exactly what
// alerts.yaml renders to (-update rewrites it).
func TestPrometheusRuleInStep(t *testing.T) {
	want := renderPrometheusRule(t)
	if *update {
		if err := os.WriteFile("prometheusrule.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("prometheusrule.yaml differs from what alerts.yaml renders to; run go test ./config/prometheus -update")
	}
}

// TestScrapeConfig: promtool check config accepts scrape.yaml's jobs with
// the rules, as the local cluster's tests run them (file_sd in place of
// Kubernetes discovery, which Debian's build lacks; a token file).
func TestScrapeConfig(t *testing.T) {
	tool := promtool(t)
	scrape, err := os.ReadFile("scrape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules, err := filepath.Abs("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := localcluster.PrometheusConfig(scrape, dir, filepath.Join(dir, "token"), rules)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(f, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "config", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check config: %v\n%s\n%s", err, out, cfg)
	}
}
