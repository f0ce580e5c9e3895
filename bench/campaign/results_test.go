package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flockd/flock/localcluster/apps"
)

func TestSummarize(t *testing.T) {
	s := time.Second
	results := map[string][]apps.Outcome{
		apps.Flock: {
			{Healthy: 40 * s},
			{Healthy: 60 * s, Rejoin: 20 * s},
			{Split: true, Healthy: 50 * s},
			{Stuck: true},
		},
	}
	got := summarize([]string{apps.Flock, apps.Upstream}, results)
	want := []SubjectSummary{
		{Subject: apps.Flock, Rounds: 4, Split: 1, Stuck: 1, HealthyP50: 50, HealthyP99: 60, RejoinP50: 20, RejoinP99: 20},
		{Subject: apps.Upstream},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("summarize (-want +got):\n%s", diff)
	}
	if p := pair(got[0].HealthyP50, got[0].HealthyP99); p != "50s / 1m0s" {
		t.Errorf("pair = %q", p)
	}
	if p := pair(got[1].HealthyP50, got[1].HealthyP99); p != "-" {
		t.Errorf("pair without samples = %q, want -", p)
	}
}

// TestWriteSummaryReadsBack: what -results writes is what
// TestResultsFiles reads, field for field.
func TestWriteSummaryReadsBack(t *testing.T) {
	want := Summary{Run: "26", App: "etcd", Command: "campaign -rounds=2", Commit: "abc1234", Seed: 7, Aborted: 1,
		Subjects: []SubjectSummary{{Subject: apps.Flock, Rounds: 2, HealthyP50: 41.5, HealthyP99: 60}},
		Machine:  &Machine{BusyPercent: 80, Cores: 2, CoreSecondsPerRound: 30.1, RoundsPerHour: 200}}
	path := filepath.Join(t.TempDir(), "campaign-run-26.json")
	if err := writeSummary(path, want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, readSummary(t, path)); diff != "" {
		t.Fatalf("read back (-want +got):\n%s", diff)
	}
}

func readSummary(t *testing.T, path string) Summary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var s Summary
	if err := d.Decode(&s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// TestResultsFiles reads every run kept in bench/results and checks that
// the figures bench/README.md states are the sums of those runs: per
// application its counted flock rounds with no split or stuck one, etcd's
// totals of every run not disturbed, and each other application's rounds,
// split brains and stuck rounds per subject.
func TestResultsFiles(t *testing.T) {
	dir := filepath.Join("..", "results")
	files, err := filepath.Glob(filepath.Join(dir, "campaign-run-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no summaries in %s (%v)", dir, err)
	}
	// counted[app] sums the app's counted flock rounds: rounds, split,
	// stuck; an app with runs and none counted states a figure of 0.
	counted := map[string][3]int{}
	totals := map[string]int{}
	// others[app][subject] sums the other applications' runs not
	// disturbed: rounds, split, stuck.
	others := map[string]map[string][3]int{}
	runs := map[string]bool{}
	for _, f := range files {
		s := readSummary(t, f)
		if s.Run == "" || s.App == "" || s.Command == "" || len(s.Subjects) == 0 {
			t.Errorf("%s: run, app, command and subjects are required: %+v", f, s)
		}
		if runs[s.Run] {
			t.Errorf("%s: run %s kept twice", f, s.Run)
		}
		runs[s.Run] = true
		if _, ok := counted[s.App]; !ok {
			counted[s.App] = [3]int{}
		}
		if s.Notes != "" {
			if _, err := os.Stat(filepath.Join(dir, s.Notes)); err != nil {
				t.Errorf("%s: notes: %v", f, err)
			}
		}
		if s.Counted && s.Disturbed {
			t.Errorf("%s: a disturbed run cannot count", f)
		}
		for _, sub := range s.Subjects {
			if sub.Subject != apps.Flock && sub.Subject != apps.Upstream {
				t.Errorf("%s: subject %q", f, sub.Subject)
			}
			if sub.Split+sub.Stuck > sub.Rounds || sub.HealthyP50 > sub.HealthyP99 {
				t.Errorf("%s: %+v is not a possible summary", f, sub)
			}
			if s.Counted && sub.Subject == apps.Flock {
				c := counted[s.App]
				counted[s.App] = [3]int{c[0] + sub.Rounds, c[1] + sub.Split, c[2] + sub.Stuck}
			}
			if s.App != "etcd" {
				if !s.Disturbed {
					if others[s.App] == nil {
						others[s.App] = map[string][3]int{}
					}
					o := others[s.App][sub.Subject]
					others[s.App][sub.Subject] = [3]int{o[0] + sub.Rounds, o[1] + sub.Split, o[2] + sub.Stuck}
				}
				continue
			}
			if !s.Disturbed {
				totals[sub.Subject] += sub.Rounds
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	for app, c := range counted {
		pattern := fmt.Sprintf(`\*\*The %s figure: ([\d,]+) flock rounds of one version of the code .*?, (\d+) split brains?, (\d+) stuck\*\*`, app)
		if app == "etcd" { // the first, stated before there were others
			pattern = `\*\*The figure: ([\d,]+) flock rounds of one version of the code .*?, (\d+) split brains, (\d+) stuck\*\*`
		}
		if figure := statedNumbers(t, text, pattern); !slices.Equal(c[:], figure) {
			t.Errorf("README's %s figure is %v (rounds, split, stuck); the counted runs sum to %v", app, figure, c)
		}
		if c[1]+c[2] != 0 {
			t.Errorf("a counted %s run has %d split and %d stuck rounds: the figure counts clean runs only", app, c[1], c[2])
		}
	}
	all := statedNumbers(t, text, `\*\*([\d,]+) rounds of flock and ([\d,]+) of upstream\*\*`)
	if got := []int{totals[apps.Flock], totals[apps.Upstream]}; !slices.Equal(got, all) {
		t.Errorf("README's totals are %v (flock, upstream); the runs not disturbed sum to %v", all, got)
	}
	for app, subs := range others {
		for sub, sum := range subs {
			stated := statedNumbers(t, text, fmt.Sprintf(`\*\*%s, %s: ([\d,]+) rounds, (\d+) split brains?, (\d+) stuck\*\*`, app, sub))
			if got := sum[:]; !slices.Equal(got, stated) {
				t.Errorf("README states %s's %s rounds as %v (rounds, split, stuck); its runs sum to %v", app, sub, stated, got)
			}
		}
	}
}

// statedNumbers returns the numbers pattern's groups match in text.
func statedNumbers(t *testing.T, text, pattern string) []int {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("bench/README.md does not state %s", pattern)
	}
	var out []int
	for _, g := range m[1:] {
		n, err := strconv.Atoi(strings.ReplaceAll(g, ",", ""))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// TestCountedRunsOneVersion: each application's counted runs ran one
// version of the subject, tests aside: the packages of this module that
// peer-finder is built from, the versions of the modules it is built from
// (go.mod), the application's example and the images' build (hack/images),
// compared by git between the runs' commits.
func TestCountedRunsOneVersion(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "results", "campaign-run-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	commits := map[string][]string{}
	for _, f := range files {
		if s := readSummary(t, f); s.Counted {
			if s.Commit == "" {
				t.Errorf("%s: a counted run without its commit", f)
			}
			commits[s.App] = append(commits[s.App], s.Commit)
		}
	}
	root := filepath.Join("..", "..")
	out, err := exec.Command("go", "list", "-C", root, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Module.Path}}{{end}}", "./cmd/peer-finder").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/flockd/flock"
	var subject []string
	modules := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		pkg, mod, _ := strings.Cut(strings.TrimSpace(line), " ")
		if dir, ok := strings.CutPrefix(pkg, module+"/"); ok {
			subject = append(subject, ":(glob)"+dir+"/*.go")
		} else if mod != module {
			modules[mod] = true
		}
	}
	if len(subject) < 5 || !modules["k8s.io/client-go"] {
		t.Fatalf("peer-finder is built from %d packages of this module and modules %v", len(subject), modules)
	}
	subject = append(subject, "hack/images", ":(exclude)*_test.go")
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			// The counted runs' commits must be in the clone's history.
			var stderr []byte
			if e := (*exec.ExitError)(nil); errors.As(err, &e) {
				stderr = e.Stderr
			}
			t.Fatalf("git %q (a shallow clone lacks the runs' commits): %v: %s", args, err, stderr)
		}
		return string(out)
	}
	for app, cs := range commits {
		paths := append(slices.Clone(subject), "examples/apps/"+app)
		for _, c := range cs[1:] {
			if diff := git(append([]string{"diff", "--stat", cs[0], c, "--"}, paths...)...); diff != "" {
				t.Errorf("%s: counted runs at %s and %s ran different subjects:\n%s", app, cs[0], c, diff)
			}
			a, b := requires(git("show", cs[0]+":go.mod")), requires(git("show", c+":go.mod"))
			for m := range modules {
				if a[m] != b[m] {
					t.Errorf("%s: counted runs at %s and %s built peer-finder with %s %q and %q", app, cs[0], c, m, a[m], b[m])
				}
			}
		}
	}
}

// requires returns go.mod's required versions by module path.
func requires(gomod string) map[string]string {
	out := map[string]string{}
	block := false
	for line := range strings.Lines(gomod) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "require" && len(f) > 1 && f[1] == "(":
			block = true
		case block && f[0] == ")":
			block = false
		case f[0] == "require" && len(f) >= 3:
			out[f[1]] = f[2]
		case block && len(f) >= 2:
			out[f[0]] = f[1]
		}
	}
	return out
}

func TestRequires(t *testing.T) {
	got := requires("module m\n\ngo 1.26\n\nrequire a.io/x v1.2.0\n\nrequire (\n\tb.io/y v0.1.0\n\tc.io/z v2.0.0 // indirect\n)\n\nreplace a.io/x => ../x\n")
	want := map[string]string{"a.io/x": "v1.2.0", "b.io/y": "v0.1.0", "c.io/z": "v2.0.0"}
	if !maps.Equal(got, want) {
		t.Errorf("requires = %v; want %v", got, want)
	}
}
