// Command mutate is a small mutation tester: it puts one plausible bug at a
// time into a package's non-test Go files (see mutantsOf for the operators)
// and runs that package's own tests against it. A mutant the tests fail on
// is caught; one they pass is a survivor, a gap in the tests.
//
//	go run ./hack/mutate [-max N] [-timeout D] [-list] ./peerfinder/membership ./peerfinder/engine ...
//
// The work tree is never modified: each mutant is handed to `go test`
// through -overlay. Mutants run one at a time at low priority (nice 10,
// go test -p 1), so a run shares the machine. A mutant that does not compile
// is "not viable" and not scored; one that makes the tests time out counts
// as caught. With -max N only N mutants per package, evenly spread over the
// package's list, are run, so a bounded run is repeatable.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type outcome string

const (
	caught    outcome = "caught"
	survived  outcome = "survived"
	timedOut  outcome = "timeout"
	notViable outcome = "not-viable"
)

type result struct {
	m       Mutant
	outcome outcome
}

func main() {
	maxPer := flag.Int("max", 0, "run at most `N` mutants per package, evenly spread (0: all)")
	timeout := flag.Duration("timeout", 0, "per-mutant test timeout (0: 3x the package's clean run, at least 30s)")
	list := flag.Bool("list", false, "list the mutants without running them")
	verbose := flag.Bool("v", false, "print every mutant's outcome as it finishes")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: mutate [flags] ./pkg...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	// Children inherit the priority: the tests yield to everyone else.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 10)

	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(tmp)
	// Interrupted: the running test's process group is killed (goTest) and
	// the temporary files removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var all []result
	var summary []string
	for _, pkg := range flag.Args() {
		ms, err := packageMutants(pkg)
		if err != nil {
			fatal(err)
		}
		total := len(ms)
		ms = spread(ms, *maxPer)
		if *list {
			for _, m := range ms {
				fmt.Println(m)
			}
			continue
		}
		base, err := cleanRun(ctx, pkg)
		if err != nil {
			fatal(fmt.Errorf("%s: the tests fail without any mutant: %w", pkg, err))
		}
		limit := *timeout
		if limit == 0 {
			limit = max(30*time.Second, 3*base)
		}
		fmt.Fprintf(os.Stderr, "%s: %d mutants (of %d), clean run %s, timeout %s\n", pkg, len(ms), total, base.Round(time.Second), limit)
		var rs []result
		for i, m := range ms {
			o, err := runMutant(ctx, pkg, m, tmp, limit)
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "mutate: interrupted")
				os.RemoveAll(tmp)
				os.Exit(1)
			}
			if err != nil {
				fatal(err)
			}
			rs = append(rs, result{m, o})
			if *verbose || o == survived {
				fmt.Fprintf(os.Stderr, "  [%d/%d] %-10s %s\n", i+1, len(ms), o, m)
			}
		}
		all = append(all, rs...)
		summary = append(summary, scoreLine(pkg, rs))
	}
	if *list {
		return
	}
	fmt.Printf("%-22s %7s %6s %8s %7s %10s %6s\n", "package", "mutants", "caught", "survived", "timeout", "not-viable", "score")
	for _, s := range summary {
		fmt.Println(s)
	}
	fmt.Println(scoreLine("total", all))
	var surv []result
	for _, r := range all {
		if r.outcome == survived {
			surv = append(surv, r)
		}
	}
	if len(surv) > 0 {
		fmt.Printf("\nsurvivors:\n")
		for _, r := range surv {
			fmt.Printf("  %s\n      %s\n", r.m, sourceLine(r.m))
		}
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "mutate: %v\n", err)
	os.Exit(1)
}

// packageMutants returns the mutants of the non-test, non-generated Go
// files in the package directory pkg.
func packageMutants(pkg string) ([]Mutant, error) {
	files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
	if err != nil {
		return nil, err
	}
	var ms []Mutant
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(src, []byte("// Code generated")) {
			continue
		}
		fm, err := mutantsOf(f, src)
		if err != nil {
			return nil, err
		}
		ms = append(ms, fm...)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%s: no mutants (no Go files?)", pkg)
	}
	return ms, nil
}

// spread returns n mutants evenly spaced over ms (all when n is 0 or more
// than there are).
func spread(ms []Mutant, n int) []Mutant {
	if n <= 0 || n >= len(ms) {
		return ms
	}
	out := make([]Mutant, 0, n)
	for i := range n {
		out = append(out, ms[i*len(ms)/n])
	}
	return out
}

func goTest(ctx context.Context, pkg string, extra ...string) *exec.Cmd {
	args := append([]string{"test", "-count=1", "-failfast", "-vet=off", "-p=1"}, extra...)
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// cleanRun runs the package's tests without mutants and returns how long
// they took.
func cleanRun(ctx context.Context, pkg string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := goTest(ctx, pkg).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%w\n%s", err, out)
	}
	return time.Since(start), nil
}

// runMutant runs pkg's tests with m applied through an overlay.
func runMutant(ctx context.Context, pkg string, m Mutant, tmp string, limit time.Duration) (outcome, error) {
	src, err := os.ReadFile(m.File)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(m.File)
	if err != nil {
		return "", err
	}
	mutated := filepath.Join(tmp, "mutant.go")
	if err := os.WriteFile(mutated, m.Apply(src), 0o644); err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {abs: mutated}})
	if err != nil {
		return "", err
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		return "", err
	}
	// The test binary's own -timeout panics with a message; the context is
	// the backstop for a hang outside the tests (build, a stuck child).
	runCtx, cancel := context.WithTimeout(ctx, limit+time.Minute)
	defer cancel()
	out, err := goTest(runCtx, pkg, "-overlay="+overlayFile, "-timeout="+limit.String()).CombinedOutput()
	switch {
	case err == nil:
		return survived, nil
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return notViable, nil
	case runCtx.Err() != nil || bytes.Contains(out, []byte("panic: test timed out")):
		return timedOut, nil
	}
	return caught, nil
}

func scoreLine(name string, rs []result) string {
	n := map[outcome]int{}
	for _, r := range rs {
		n[r.outcome]++
	}
	scored := n[caught] + n[timedOut] + n[survived]
	score := "-"
	if scored > 0 {
		score = fmt.Sprintf("%.1f%%", 100*float64(n[caught]+n[timedOut])/float64(scored))
	}
	return fmt.Sprintf("%-22s %7d %6d %8d %7d %10d %6s", name, len(rs), n[caught], n[survived], n[timedOut], n[notViable], score)
}

func sourceLine(m Mutant) string {
	src, err := os.ReadFile(m.File)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(src), "\n")
	if m.Line-1 < len(lines) {
		return strings.TrimSpace(lines[m.Line-1])
	}
	return ""
}
