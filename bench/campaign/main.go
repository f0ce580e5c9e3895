// Command campaign runs randomized bootstrap rounds of an application
// (-app: etcd, zookeeper, redis or galera, examples/apps/<app>) in real containers
// on the local cluster's real nodes, members spread over them, with flock's
// peer-finder and Kubernetes' upstream peer-finder side by side: the
// same manifest and scripts, the same fault schedule, each round
// of each subject in its own namespace, rounds in parallel. The oracle is
// the application itself (package localcluster/apps, apps.App):
//   - etcd: polled over its client API at each pod's IP, every healthy poll
//     confirmed with etcdctl in every pod: one cluster id, members equal to
//     the StatefulSet's pods, all healthy;
//   - zookeeper: srvr and conf in every pod: one leader, the others
//     followers, one committed configuration whose participants are the
//     pods; a marker znode written once healthy, on every member after;
//   - redis: info replication in every pod: one primary whose replicas are
//     the other pods, each following it with its link up; a key written
//     through the primary once healthy (and acknowledged by every replica),
//     on every member after;
//   - galera: the wsrep status in every pod: one cluster state uuid, a
//     primary component of exactly the pods, all Synced; rows written
//     (each acknowledged) through one member once healthy, at least as
//     many on every member after.
//
// More than one cluster identity over a round (etcd's cluster ids, the
// marks read, Galera's state uuids) or two clusters at once (two
// primaries; two leaders of different configurations; two primary
// components) is a split brain; no healthy cluster, and no
// progress towards one for -stall (members starting, joining, agreeing) or
// none by -deadline, is a stuck bootstrap.
//
// A round: a cold start (Parallel or OrderedReady, each pod's start delayed
// by up to 5 s), and, each with probability 1/2, a member deleted 2-20 s
// after the start, a scale-up by 2 members 1-15 s after the start, and
// member 0 deleted with its claim (its data lost) once the cluster was
// healthy and marked, after which it must be healthy again with the mark;
// with -node-faults P, with probability P the real node of a member is
// stopped or killed 0-30 s after the start and started 15-60 s later (one
// node down at a time), after which the cluster must be healthy. Across the campaign the
// API server is restarted every -apiserver-restart-every (rounds in flight
// see it mid-bootstrap), and CoreDNS runs with "cache 30" (records with TTL
// 30) as in production unless -dns-cache=false; with -dns-outage-every,
// CoreDNS is also stopped for -dns-outage that often (DNS unreachable:
// lookups refused).
//
// Rounds run in parallel up to -parallel, but none starts while the
// machine's CPU pressure is at or above -max-cpu-pressure, or while the
// rounds in flight and it would plan more than -max-members members
// together, and two start at least -start-gap apart: a campaign that piles
// rounds onto a saturated machine measures the machine (deadline misses),
// not the bootstrap.
//
// Run it with make campaign (CAMPAIGN_FLAGS=...). It prints one line per
// round and subject and, at the end, per subject: rounds, split brains,
// stuck, time to healthy p50/p99 and time to rejoin p50/p99; with -results
// (make campaign sets it) the same summary, the command and the commit go
// to a JSON file, the form bench/results/ keeps one of per run.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flockd/flock/bench/internal/benchkit"
	"github.com/flockd/flock/internal/version"
	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/apps"
)

func main() {
	fs := flag.NewFlagSet("campaign", flag.ContinueOnError)
	rounds := fs.Int("rounds", 10, "rounds to run (each runs once per subject)")
	parallel := fs.Int("parallel", 4, "subject rounds in flight at once, at most (a round of each subject is one)")
	maxPressure := fs.Float64("max-cpu-pressure", 60, "start no round while the machine's CPU pressure (/proc/pressure/cpu some avg10, percent) is at or above this; 0 no limit")
	startGap := fs.Duration("start-gap", 5*time.Second, "start two subject rounds at least this far apart")
	maxMembers := fs.Int("max-members", 14, "start no round while the rounds in flight and it would plan more members than this together (each round at its peak: its replicas or its scale-up target; a larger round starts alone); 0 no limit")
	app := fs.String("app", "etcd", "the application: "+strings.Join(slices.Sorted(maps.Keys(apps.Apps)), ", "))
	subjects := fs.String("subjects", apps.Flock+","+apps.Upstream, "comma-separated subjects: flock, upstream")
	nodeFaults := fs.Float64("node-faults", 0, "probability (0 to 1) that a round stops or kills a member's real node and starts it again; 0 none. Takes the cluster's nodes down: never on a cluster others use")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the fault schedule (printed; the same seed gives the same plans)")
	replicas := fs.Int("replicas", 3, "members at the cold start")
	stall := fs.Duration("stall", 0, "a round is stuck when its cluster got no closer to healthy for this long (members starting, joining, becoming healthy); unset: the application's (2m, galera 4m); 0 only -deadline")
	deadline := fs.Duration("deadline", apps.DefaultDeadline, "time a round has to become healthy (and again after the wipe), however it progresses")
	restartEvery := fs.Duration("apiserver-restart-every", 3*time.Minute, "restart kube-apiserver this often during the campaign; 0 never")
	dnsOutageEvery := fs.Duration("dns-outage-every", 0, "stop CoreDNS this often during the campaign (for -dns-outage each time); 0 never")
	dnsOutage := fs.Duration("dns-outage", 20*time.Second, "how long each CoreDNS outage lasts")
	dnsCache := fs.Bool("dns-cache", true, `run CoreDNS with "cache 30" and TTL 30 during the campaign, as in production`)
	duration := fs.Duration("duration", 0, "start no new round after this long (0: run all -rounds); the rounds run are reported")
	logDir := fs.String("log-dir", "", "write the containers' logs of failed rounds here (default a temporary directory)")
	results := fs.String("results", "", "also write the run's summary as JSON to this file (bench/results/ keeps one per run); empty: none")
	runName := fs.String("run", "", "the run's name in -results (e.g. 26)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if apps.Apps[*app] == nil {
		fmt.Fprintf(os.Stderr, "invalid -app: %q is not one of %s\n", *app, strings.Join(slices.Sorted(maps.Keys(apps.Apps)), ", "))
		os.Exit(2)
	}
	stallSet := false
	fs.Visit(func(f *flag.Flag) { stallSet = stallSet || f.Name == "stall" })
	if !stallSet {
		*stall = apps.StallFor(*app)
	}
	subs, err := parseSubjects(*subjects)
	if err != nil {
		fmt.Fprintf(os.Stderr, "invalid -subjects: %v\n", err)
		os.Exit(2)
	}
	if *nodeFaults < 0 || *nodeFaults > 1 {
		fmt.Fprintln(os.Stderr, "invalid -node-faults: a probability from 0 to 1")
		os.Exit(2)
	}
	if *dnsOutage < 0 || *dnsOutageEvery < 0 || *restartEvery < 0 {
		fmt.Fprintln(os.Stderr, "invalid -dns-outage, -dns-outage-every or -apiserver-restart-every: must not be negative")
		os.Exit(2)
	}
	if *maxPressure < 0 || *maxPressure > 100 || *startGap < 0 {
		fmt.Fprintln(os.Stderr, "invalid -max-cpu-pressure or -start-gap: a percent from 0 to 100 and a duration not negative")
		os.Exit(2)
	}
	if *maxMembers < 0 {
		fmt.Fprintln(os.Stderr, "invalid -max-members: must not be negative")
		os.Exit(2)
	}
	if *rounds < 1 || *parallel < 1 || *replicas < 1 {
		fmt.Fprintln(os.Stderr, "invalid -rounds, -parallel or -replicas: must be at least 1")
		os.Exit(2)
	}
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The campaign stops (rounds in flight are aborted, not counted) on a
	// signal or when the cluster itself fails.
	ctx, cancel := context.WithCancelCause(sig)
	defer cancel(nil)
	abort = cancel
	if err := run(ctx, config{*app, *nodeFaults, *rounds, *parallel, *maxPressure, *startGap, *maxMembers, subs, *seed, *replicas, *stall, *deadline, *restartEvery, *dnsOutageEvery, *dnsOutage, *dnsCache, *logDir, *duration, *results, *runName, strings.Join(os.Args, " ")}); err != nil {
		slog.Error("campaign failed", "err", err)
		os.Exit(1)
	}
}

// abort stops the campaign with a cause.
var abort context.CancelCauseFunc

type config struct {
	app              string
	nodeFaults       float64
	rounds, parallel int
	maxPressure      float64
	startGap         time.Duration
	maxMembers       int
	subjects         []string
	seed             uint64
	replicas         int
	stall, deadline  time.Duration
	restartEvery     time.Duration
	dnsOutageEvery   time.Duration
	dnsOutage        time.Duration
	dnsCache         bool
	logDir           string
	duration         time.Duration
	results, run     string // -results, -run
	command          string // as run
}

func run(ctx context.Context, cfg config) error {
	stateDir := os.Getenv("FLOCK_STATE_DIR")
	if stateDir == "" || os.Getenv("KUBECONFIG") == "" {
		return fmt.Errorf("KUBECONFIG and FLOCK_STATE_DIR must point at the local cluster; run: make campaign")
	}
	state, err := localcluster.Load(stateDir)
	if err != nil {
		return err
	}
	// The campaign restarts the API server and rewrites CoreDNS's
	// Corefile: a second campaign on the cluster would undo the first's.
	release, ok, err := state.Claim("campaign")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("another campaign is running on the cluster in %s", stateDir)
	}
	defer release()
	if len(state.RealNodes) == 0 {
		return fmt.Errorf("the local cluster has no real nodes (%s); the campaign runs real containers", state.RealNodeSkipped)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	root, err := localcluster.RepoRoot(".")
	if err != nil {
		return err
	}
	manifests, err := apps.Manifests(filepath.Join(root, "examples", "apps", cfg.app))
	if err != nil {
		return err
	}
	if cfg.logDir == "" {
		if cfg.logDir, err = os.MkdirTemp("", "campaign-logs-"); err != nil {
			return err
		}
	}
	if cfg.dnsCache {
		restore, err := cacheDNS(ctx, state)
		if err != nil {
			return err
		}
		defer restore()
	}
	c := &apps.Campaign{Config: restCfg, Client: cs, App: apps.Apps[cfg.app], Manifests: manifests, Stall: cfg.stall, Deadline: cfg.deadline, LogDir: cfg.logDir, Edit: apps.ForRealNode}
	fmt.Printf("campaign: %s, %d rounds x %v, node faults in %g of rounds, at most %d in parallel and %d members (none started at CPU pressure %g%% or more, two at least %s apart), seed %d, stall %s, deadline %s, CoreDNS cache %v, apiserver restart every %s, CoreDNS down for %s every %s; logs of failed rounds in %s\n",
		cfg.app, cfg.rounds, cfg.subjects, cfg.nodeFaults, cfg.parallel, cfg.maxMembers, cfg.maxPressure, cfg.startGap, cfg.seed, cfg.stall, cfg.deadline, cfg.dnsCache, cfg.restartEvery, cfg.dnsOutage, cfg.dnsOutageEvery, cfg.logDir)

	faults := &clusterFaults{state: state, abort: abort, done: make(chan struct{})}
	if cfg.nodeFaults > 0 {
		c.FaultNode = faults.faultNode
	}
	faults.every(ctx, 2*time.Second, faults.revive)
	faults.periodically(ctx, cfg.restartEvery, "kube-apiserver restarted", func(ctx context.Context) error {
		return faults.state.Restart(ctx, "kube-apiserver")
	})
	faults.periodically(ctx, cfg.dnsOutageEvery, fmt.Sprintf("CoreDNS down for %s", cfg.dnsOutage), func(ctx context.Context) error {
		return faults.state.Outage(ctx, "coredns", cfg.dnsOutage)
	})

	start := time.Now()
	busy0, total0 := machineCPU()
	ended, err := acctRun(filepath.Join(os.TempDir(), fmt.Sprintf("campaign-%d.acct", os.Getpid())))
	if err != nil {
		fmt.Printf("no process accounting (%v): what ended during the run is one part\n", err)
	}
	defer ended()
	cpu0 := sampleCPU()
	var mu sync.Mutex
	results := map[string][]apps.Outcome{}
	aborted := 0
	psi0, psiErr := readPressure()
	if cfg.maxPressure > 0 && psiErr != nil {
		fmt.Printf("no CPU pressure to read (%v): rounds are limited by -parallel and -start-gap only\n", psiErr)
	}
	// Each subject's round starts on its own, so a fast subject's slot does
	// not wait for a slow one's; a round's subjects are started one after
	// the other and so run at about the same time.
	adm := &admission{maxPressure: cfg.maxPressure, gap: cfg.startGap, maxMembers: cfg.maxMembers, read: readPressure}
	slots := make(chan struct{}, cfg.parallel)
	var workers sync.WaitGroup
	stopFeeding := make(<-chan time.Time)
	if cfg.duration > 0 {
		stopFeeding = time.After(cfg.duration)
	}
	ran := 0
feed:
	for r := range cfg.rounds {
		plan := apps.NewPlan(cfg.seed, r, cfg.replicas)
		plan.Node = apps.DrawNodeFault(cfg.seed, r, cfg.replicas, cfg.nodeFaults)
		for _, s := range cfg.subjects {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break feed
			case <-stopFeeding:
				break feed
			}
			if !adm.wait(ctx, stopFeeding, plan.Peak()) {
				break feed
			}
			workers.Go(func() {
				defer func() { <-slots }()
				defer adm.done(plan.Peak())
				o := c.Run(ctx, s, plan)
				mu.Lock()
				defer mu.Unlock()
				if o.Aborted {
					fmt.Printf("%-8s %s: aborted, not counted: %s\n", o.Subject, plan, o.Detail)
					aborted++
					if ctx.Err() == nil {
						abort(fmt.Errorf("round %d could not run: %s", plan.Round, o.Detail))
					}
					return
				}
				results[o.Subject] = append(results[o.Subject], o)
				fmt.Printf("%-8s %s: %s\n", o.Subject, plan, verdict(o))
			})
		}
		ran++
	}
	workers.Wait()
	if err := faults.stop(); err != nil {
		slog.Error("node left down", "err", err)
	}

	elapsed := time.Since(start)
	sum := Summary{Run: cmp.Or(cfg.run, start.UTC().Format("20060102T150405Z")), App: cfg.app, Command: cfg.command, Commit: version.Get().Commit, Seed: cfg.seed, Aborted: aborted,
		Started: start.UTC().Format(time.RFC3339), Ended: time.Now().UTC().Format(time.RFC3339)}
	fmt.Printf("\n%d rounds started in %s (seed %d), %d subject rounds aborted and not counted\n", ran, elapsed.Round(time.Second), cfg.seed, aborted)
	judged := 0
	for _, rs := range results {
		judged += len(rs)
	}
	if busy1, total1 := machineCPU(); total1 > total0 && judged > 0 {
		// The machine's, not only the campaign's: the cluster, the
		// containers, and anything else that ran meanwhile.
		busy, cores := busy1-busy0, (total1-total0)/elapsed.Seconds()
		sum.Machine = &Machine{BusyPercent: round1(100 * busy / (total1 - total0)), Cores: round1(cores),
			CoreSecondsPerRound: round1(busy / float64(judged)), RoundsPerHour: round1(float64(judged) / elapsed.Hours())}
		fmt.Printf("machine CPU: %.0f%% of %.0f cores busy, %.1f core-seconds per judged subject round (%d); %.0f subject rounds per hour\n",
			100*busy/(total1-total0), cores, busy/float64(judged), judged, float64(judged)/elapsed.Hours())
		cpu1 := sampleCPU()
		sum.Machine.Split = cpuSplit(cpu0, cpu1, ended(), busy, judged)
		printCPUSplit(sum.Machine.Split, busy)
	}
	if psi1, err := readPressure(); err == nil && psiErr == nil {
		if sum.Machine != nil {
			sum.Machine.CPUWaitPercent = round1(100 * (psi1.total - psi0.total).Seconds() / elapsed.Seconds())
		}
		fmt.Printf("CPU pressure: a task waited for a CPU %.0f%% of the time; rounds waited %s in all to start (-max-cpu-pressure %g, -start-gap %s)\n",
			100*(psi1.total-psi0.total).Seconds()/elapsed.Seconds(), adm.held.Round(time.Second), cfg.maxPressure, cfg.startGap)
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
		fmt.Printf("campaign stopped early: %v\n", cause)
	}
	fmt.Printf("%-9s %7s %12s %6s %22s %22s\n", "subject", "rounds", "split brains", "stuck", "time to healthy p50/p99", "rejoin p50/p99")
	sum.Subjects = summarize(cfg.subjects, results)
	var bad bool
	for _, s := range sum.Subjects {
		fmt.Printf("%-9s %7d %12d %6d %22s %22s\n", s.Subject, s.Rounds, s.Split, s.Stuck, pair(s.HealthyP50, s.HealthyP99), pair(s.RejoinP50, s.RejoinP99))
		if s.Subject == apps.Flock && s.Split+s.Stuck > 0 {
			bad = true
		}
	}
	if cfg.results != "" {
		if err := writeSummary(cfg.results, sum); err != nil {
			return err
		}
		fmt.Printf("summary written to %s\n", cfg.results)
	}
	if rows := headToHead(results[apps.Flock], results[apps.Upstream]); len(rows) > 0 {
		fmt.Printf("\n%-13s %7s %11s %32s\n", "policy", "rounds", "flock first", "upstream - flock min/median/max")
		for _, r := range rows {
			fmt.Printf("%-13s %7d %11d %32s\n", r.policy, r.rounds, r.flockFirst,
				fmt.Sprintf("%s / %s / %s", r.diffs[0], benchkit.Percentile(r.diffs, 50).Round(100*time.Millisecond), r.diffs[len(r.diffs)-1]))
		}
	}
	if bad {
		return fmt.Errorf("flock had split or stuck rounds: logs in %s", cfg.logDir)
	}
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return nil
}

func verdict(o apps.Outcome) string {
	switch {
	case o.Split:
		return "SPLIT BRAIN (" + o.NS + "): " + o.Detail
	case o.Stuck:
		return "STUCK (" + o.NS + "): " + o.Detail
	}
	s := fmt.Sprintf("healthy after %s", o.Healthy.Round(100*time.Millisecond))
	if o.Rejoin > 0 {
		s += fmt.Sprintf(", rejoined %s after the wipe", o.Rejoin.Round(100*time.Millisecond))
	}
	return s
}

// cacheDNS restarts CoreDNS with "cache 30" and TTL 30 and returns the
// function that puts the cluster's Corefile back.
func cacheDNS(ctx context.Context, s *localcluster.State) (restore func(), err error) {
	var conf string
	for _, p := range s.Procs {
		if p.Name == "coredns" {
			for _, a := range p.Args {
				if v, ok := strings.CutPrefix(a, "-conf="); ok {
					conf = v
				}
			}
		}
	}
	if conf == "" {
		return nil, fmt.Errorf("no coredns -conf in the cluster's state")
	}
	b, err := os.ReadFile(conf)
	if err != nil {
		return nil, err
	}
	orig, cached, err := withCache(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", conf, err)
	}
	if err := os.WriteFile(conf, []byte(cached), 0o644); err != nil {
		return nil, err
	}
	if err := s.Restart(ctx, "coredns"); err != nil {
		return nil, err
	}
	return func() {
		_ = os.WriteFile(conf, []byte(orig), 0o644)
		if fresh, err := localcluster.Load(s.StateDir); err == nil {
			s = fresh // node faults changed the state since
		}
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Restart(rctx, "coredns"); err != nil {
			slog.Error("restore CoreDNS", "err", err)
		}
	}, nil
}

// machineCPU reads the seconds all CPUs spent busy and in total since boot
// (/proc/stat); zeros where it cannot be read.
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	var idle float64
	for i, x := range f[1:] {
		v, _ := strconv.ParseFloat(x, 64)
		if i < 8 { // user nice system idle iowait irq softirq steal; guest is in user
			total += v
		}
		if i == 3 || i == 4 {
			idle += v
		}
	}
	const userHZ = 100 // USER_HZ, fixed by the kernel ABI
	return (total - idle) / userHZ, total / userHZ
}

// withCache returns the cluster's Corefile without and with "cache 30" and
// TTL 30. A Corefile a stopped campaign left cached is first put back, so
// the edit never doubles the cache plugin (CoreDNS refuses to start then).
func withCache(corefile string) (plain, cached string, err error) {
	plain = strings.Replace(strings.Replace(corefile, "    cache 30\n", "", 1), "ttl 30", "ttl 0", 1)
	cached = strings.Replace(strings.Replace(plain, "ttl 0", "ttl 30", 1), "    errors\n", "    errors\n    cache 30\n", 1)
	if strings.Count(cached, "cache 30") != 1 || !strings.Contains(cached, "ttl 30") || strings.Contains(plain, "cache") {
		return "", "", fmt.Errorf("cannot switch the cache on: want an errors line, ttl 0 and no cache plugin")
	}
	return plain, cached, nil
}

// row compares flock and upstream on the rounds of one pod management
// policy that both made healthy.
type row struct {
	policy     string
	rounds     int
	flockFirst int
	// diffs are upstream's time to healthy minus flock's, sorted.
	diffs []time.Duration
}

// headToHead pairs the two subjects' outcomes of the same round (plan) and
// compares their times to healthy, per policy.
func headToHead(flock, upstream []apps.Outcome) []row {
	up := map[int]apps.Outcome{}
	for _, o := range upstream {
		up[o.Plan.Round] = o
	}
	by := map[string]*row{}
	for _, f := range flock {
		u, ok := up[f.Plan.Round]
		if !ok || f.Healthy == 0 || u.Healthy == 0 {
			continue
		}
		r := by[f.Plan.Policy]
		if r == nil {
			r = &row{policy: f.Plan.Policy}
			by[f.Plan.Policy] = r
		}
		r.rounds++
		if f.Healthy < u.Healthy {
			r.flockFirst++
		}
		r.diffs = append(r.diffs, (u.Healthy - f.Healthy).Round(100*time.Millisecond))
	}
	var rows []row
	for _, p := range slices.Sorted(maps.Keys(by)) {
		slices.Sort(by[p].diffs)
		rows = append(rows, *by[p])
	}
	return rows
}
