// Command footprint measures, side by side at N peers (default 1,000), the
// memory and CPU of flock's peer-finder (-source=endpointslice, pods and
// dns; built as the image ships it, plus any -also binaries) and
// Kubernetes' own peer-finder
// (test/images/pets/peer-finder, built at the local control plane's
// version), each with an -on-change hook, once every one has delivered the
// whole set and the cluster is idle.
//
// It runs against the local cluster, whose environment it reads
// (KUBECONFIG, FLOCK_DNS, FLOCK_CLUSTER_DOMAIN, FLOCK_UPSTREAM_PEER_FINDER):
//
//	make bench-footprint    # = bin/flock-cluster exec -- go run ./bench/footprint
//
// # Method
//
// A headless service "fp" selects N pods fp-0..fp-N-1 (hostname and
// subdomain set, as a StatefulSet would), created directly by the benchmark
// with spec.nodeName round robin over the kwok nodes: the scheduler would
// stop at the nodes' 110-pod capacity, kwok does not. Their readiness delay
// is 0. Once the EndpointSlices show N ready endpoints, the finders start
// as real processes (upstream through the DNS forwarder and mount namespace
// of package bench/internal/benchkit, which needs root; without root only
// flock is measured) and the benchmark waits until every hook saw N peers.
// Then, over an idle window (-idle, default 30s), it samples each finder
// process's VmRSS every second from /proc/<pid>/status and its CPU time
// (utime+stime, the process alone, not its hooks) from /proc/<pid>/stat at
// the start and the end of the window. It prints, per finder: the CPU spent
// until delivery, the peak RSS so far (VmHWM), the RSS over the window
// (mean and max; anon and file parts, RssAnon and RssFile, at its end), the
// CPU over the window, the hook runs and the peers of the last one.
//
// # Shared and private memory
//
// VmRSS counts the binary's page cache in every process that maps it,
// though a node holds those pages once for every process of the same file
// (containers of one image share the lower layer's file through overlayfs).
// -copies=K starts K processes of each finder (the same binary file and
// flags, each with its own hook, as K members of one stateful set on one
// node; the first table then shows the mean over the copies), and a second
// table gives, per finder, means over the window and the copies of VmRSS,
// Pss (each page divided by the processes that map it), USS
// (Private_Clean+Private_Dirty: what the process alone holds) and Shared
// (Shared_Clean+Shared_Dirty), read from /proc/<pid>/smaps_rollup every
// second (smaps summed on kernels without it); the sum of the copies' Pss;
// and what the K copies cost together: their distinct physical pages
// (page frame numbers of /proc/<pid>/pagemap, root only; mean over the
// window), and that divided by K, the cost per member. flock's three sources
// run the same binary, so their Pss also splits pages with one another;
// "copies together" counts only the copies of one finder, as if it ran
// alone on the node. The last lines give flock's ratios to upstream's.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/flockd/flock/bench/internal/benchkit"
)

// Short names: a DNS message (even over TCP) is at most 64 KiB and SRV
// targets are never compressed, so the names decide how many peers a DNS
// answer can hold. With the service "fp" in a namespace "fp-xxxxx" a record
// takes 56 bytes and about 1,160 fit; "bench" in "bench-footprint-xxxxx"
// would fit only about 870 (CoreDNS then sets TC over TCP and both DNS
// finders rightly refuse the partial set).
const (
	service = "fp"
	self    = "fp-0"
	clkTck  = 100 // USER_HZ: /proc/<pid>/stat's unit on Linux

	upstreamName = "upstream peer-finder"
)

func main() {
	pods := flag.Int("pods", 1000, "peers (pods in the service)")
	idle := flag.Duration("idle", 30*time.Second, "idle window sampled after every finder delivered all peers")
	keep := flag.Bool("keep", false, "keep the namespace and work dir (its pods fill the kwok nodes: the scheduler places no other pod until it is deleted)")
	rounds := flag.Int("rounds", 0, "after the idle window, rounds of: the last member not ready, then ready again; prints the time from its Ready to each watch finder's hook with all peers (p50/p99) and the finders' CPU, peak RSS and RSS after the rounds")
	copies := flag.Int("copies", 1, "processes of each finder (same binary and flags, as K members of one stateful set on one node); tables show the mean over the copies")
	var also binaries
	flag.Var(&also, "also", "label=path of a further peer-finder binary measured beside this tree's (e.g. one built from an older commit); repeatable")
	flag.Parse()
	if *copies < 1 {
		fmt.Fprintln(os.Stderr, "bench/footprint: -copies must be at least 1")
		os.Exit(2)
	}
	if err := run(*pods, *idle, *keep, also, *rounds, *copies); err != nil {
		fmt.Fprintln(os.Stderr, "bench/footprint:", err)
		os.Exit(1)
	}
}

// binaries are -also flags: further peer-finder binaries to measure.
type binaries []struct{ label, path string }

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(v string) error {
	label, path, ok := strings.Cut(v, "=")
	if !ok || label == "" || path == "" {
		return errors.New("want label=path")
	}
	*b = append(*b, struct{ label, path string }{label, path})
	return nil
}

func run(n int, idle time.Duration, keep bool, also binaries, rounds, copies int) error {
	env, err := benchkit.LoadEnv("bench-footprint", 200)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "flock-bench-footprint-")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	ns, err := benchkit.Namespace(ctx, env.Client, "fp")
	if ns != "" && !keep {
		defer func() {
			if err := benchkit.DeleteNamespace(env.Client, ns, 10*time.Minute); err != nil {
				fmt.Fprintln(os.Stderr, "bench/footprint:", err)
			}
		}()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "namespace %s, work dir %s\n", ns, dir)

	start := time.Now()
	if err := createPods(ctx, env.Client, ns, n); err != nil {
		return err
	}
	if err := waitEndpoints(ctx, env.Client, ns, n, 5*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d pods ready in the EndpointSlices after %s\n", n, time.Since(start).Round(time.Millisecond))

	pf, err := benchkit.BuildPeerFinder(dir)
	if err != nil {
		return err
	}
	if st, err := os.Stat(pf); err == nil {
		fmt.Fprintf(os.Stderr, "peer-finder binary: %.1f MB (static, stripped, as in the image)\n", float64(st.Size())/1e6)
	}
	dnsServer := env.DNS
	var upstream *benchkit.Spec
	stopFwd, err := benchkit.Forward(env.DNS)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "%v: upstream peer-finder skipped (it can only use port 53); flock dns asks CoreDNS directly\n", err)
	case env.Upstream == "":
		defer stopFwd()
		fmt.Fprintln(os.Stderr, "FLOCK_UPSTREAM_PEER_FINDER not set: upstream peer-finder skipped")
	default:
		defer stopFwd()
		dnsServer = benchkit.ForwarderAddr
		argv, err := benchkit.UpstreamArgv(dir, ns, env.Domain, self, env.Upstream, "-service="+service, "-ns="+ns, "-domain="+env.Domain)
		if err != nil {
			return err
		}
		upstream = &benchkit.Spec{Name: upstreamName, Argv: argv}
	}
	common := []string{"-service=" + service, "-ns=" + ns, "-domain=" + env.Domain, "-hostname=" + self}
	flock := func(label, bin string) []benchkit.Spec {
		return []benchkit.Spec{
			{Name: label + " endpointslice", Argv: append([]string{bin, "-source=endpointslice", "-kubeconfig=" + env.Kubeconfig}, common...)},
			{Name: label + " pods", Argv: append([]string{bin, "-source=pods", "-selector=app=" + service, "-kubeconfig=" + env.Kubeconfig}, common...)},
			{Name: label + " dns", Argv: append([]string{bin, "-source=dns", "-dns-server=" + dnsServer}, common...)},
		}
	}
	specs := flock("flock", pf)
	if upstream != nil {
		specs = append(specs, *upstream)
	}
	for _, b := range also {
		specs = append(specs, flock(b.label, b.path)...)
	}

	var kinds []string // finder i is a copy of kinds[i/copies]
	var all []benchkit.Spec
	for _, sp := range specs {
		kinds = append(kinds, sp.Name)
		for c := range copies {
			if copies > 1 {
				all = append(all, benchkit.Spec{Name: fmt.Sprintf("%s #%d", sp.Name, c+1), Argv: sp.Argv})
			} else {
				all = append(all, sp)
			}
		}
	}
	finders, err := benchkit.Start(dir, all)
	defer benchkit.StopAll(finders)
	if err != nil {
		return err
	}
	started := time.Now()
	// A finder that does not deliver (e.g. a DNS answer too large) is
	// still measured and marked in the table.
	if err := benchkit.WaitHooks(finders, n, time.Minute); err != nil {
		fmt.Fprintf(os.Stderr, "initial delivery: %v (logs in %s)\n", err, dir)
	} else {
		fmt.Fprintf(os.Stderr, "every hook saw %d peers %s after the finders started\n", n, time.Since(started).Round(time.Millisecond))
	}
	fmt.Fprintf(os.Stderr, "sampling %s idle\n", idle)

	for _, f := range finders {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", f.Cmd.Process.Pid))
		fmt.Fprintf(os.Stderr, "%s: pid %d (%s)\n", f.Name, f.Cmd.Process.Pid, strings.TrimSpace(string(comm)))
	}
	results := make([]result, len(finders))
	var wg sync.WaitGroup
	for i, f := range finders {
		wg.Go(func() {
			r, err := sample(f.Cmd.Process.Pid, idle)
			r.name, r.err = f.Name, err
			results[i] = r
		})
	}
	distinct := make([]int64, len(kinds)) // KiB of the distinct pages of each kind's copies
	for k := range kinds {
		var pids []int
		for _, f := range finders[k*copies : (k+1)*copies] {
			pids = append(pids, f.Cmd.Process.Pid)
		}
		wg.Go(func() {
			var err error
			if distinct[k], err = sampleTogether(pids, idle); err != nil {
				fmt.Fprintf(os.Stderr, "%s: pages of the copies together: %v\n", kinds[k], err)
				distinct[k] = -1
			}
		})
	}
	wg.Wait()
	for i, f := range finders {
		runs, err := benchkit.ReadRuns(f.Log)
		if err != nil {
			return err
		}
		results[i].hookRuns = len(runs)
		if len(runs) > 0 {
			results[i].delivered = runs[len(runs)-1].Peers
		}
	}

	// One row per finder: the mean over its copies.
	rows := make([]row, len(kinds))
	for k, name := range kinds {
		rows[k] = mean(results[k*copies : (k+1)*copies])
		rows[k].name = name
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	of := ""
	if copies > 1 {
		of = fmt.Sprintf(", mean of %d copies", copies)
	}
	fmt.Fprintf(w, "finder (%d peers%s)\tCPU at start\tpeak RSS\tidle RSS mean\tidle RSS max\t(anon\tfile)\tidle CPU\tidle CPU %%\thook runs\tdelivered\t\n", n, of)
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(w, "%s\t%v\t\t\t\t\t\t\t\t\t\t\n", r.name, r.err)
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f%%\t%s\t%s\t\n", r.name, cpu(r.cpuBefore), mib(r.hwm), mib(r.rssMean), mib(r.rssMax),
			mib(r.anon), mib(r.file), cpu(r.cpuIdle), 100*r.cpuIdle.Seconds()/idle.Seconds(), r.runs, r.peers)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := memory(n, copies, rows, distinct); err != nil {
		return err
	}
	if rounds > 0 {
		return churn(ctx, env.Client, ns, n, rounds, finders, results)
	}
	return nil
}

// churn measures, over rounds, the time from the last member (fp-N-1)
// turning Ready to the hook start of each finder that delivered all n
// peers, with every such finder's CPU over the rounds, its peak RSS and
// its RSS after the last round.
func churn(ctx context.Context, c kubernetes.Interface, ns string, n, rounds int, finders []*benchkit.Finder, results []result) error {
	member := fmt.Sprintf("%s-%d", service, n-1)
	var live []*benchkit.Finder
	for i, f := range finders {
		if results[i].delivered == n {
			live = append(live, f)
		} else {
			fmt.Fprintf(os.Stderr, "%s delivered %d of %d peers: not in the rounds\n", f.Name, results[i].delivered, n)
		}
	}
	cpu0 := make(map[string]time.Duration)
	for _, f := range live {
		cpu0[f.Name], _ = cpuTime(f.Cmd.Process.Pid)
	}
	ready := benchkit.PodReadyTimes(ctx, c, ns, member)
	lat := make(map[string][]time.Duration)
	start := time.Now()
	for r := range rounds {
		if err := setReady(ctx, c, ns, member, false); err != nil {
			return err
		}
		if err := benchkit.WaitHooks(live, n-1, 2*time.Minute); err != nil {
			return fmt.Errorf("round %d, not ready: %w", r, err)
		}
		down := time.Now()
		for len(ready) > 0 {
			<-ready
		}
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		if err := setReady(ctx, c, ns, member, true); err != nil {
			return err
		}
		var t0 time.Time
		select {
		case t0 = <-ready:
		case <-time.After(time.Minute):
			return fmt.Errorf("round %d: %s never turned ready", r, member)
		}
		got, err := benchkit.HookTimes(live, n, down, 2*time.Minute)
		if err != nil {
			return fmt.Errorf("round %d, ready: %w", r, err)
		}
		for name, t := range got {
			lat[name] = append(lat[name], t.Sub(t0))
		}
		fmt.Fprintf(os.Stderr, "round %d/%d done\n", r+1, rounds)
	}
	elapsed := time.Since(start)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%dth member ready -> hook with all\tp50\tp99\tmax\trounds\tCPU over the rounds\tpeak RSS\tRSS after\t(anon)\t\n", n)
	for _, f := range live {
		d := lat[f.Name]
		c1, _ := cpuTime(f.Cmd.Process.Pid)
		st, _ := status(f.Cmd.Process.Pid)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s in %s\t%s\t%s\t%s\t\n", f.Name, benchkit.Latency(d, 50), benchkit.Latency(d, 99), benchkit.Latency(d, 100), len(d),
			cpu(c1-cpu0[f.Name]), elapsed.Round(time.Second), mib(st["VmHWM"]), mib(st["VmRSS"]), mib(st["RssAnon"]))
	}
	return w.Flush()
}

func setReady(ctx context.Context, c kubernetes.Interface, ns, pod string, ready bool) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.flockd.io/ready":"%v"}}}`, ready)
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set %s ready=%v: %w", pod, ready, err)
	}
	return nil
}

type result struct {
	name               string
	cpuBefore, cpuIdle time.Duration
	hwm                int64 // KiB
	rssMean, rssMax    int64 // KiB
	anon, file         int64 // KiB: RssAnon and RssFile at the end of the window
	pss, uss, shared   int64 // KiB: means over the window (smaps_rollup)
	hookRuns           int
	delivered          int // peers in the hook's last run
	err                error
}

// row is a finder's line in the tables: the mean over its copies.
type row struct {
	result
	runs, peers string // hook runs and delivered peers: one number, or min-max over the copies
}

// mean averages the copies' results; an error of one is the row's.
func mean(rs []result) row {
	var r row
	var runs, peers []int
	for _, x := range rs {
		r.err = cmp.Or(r.err, x.err)
		r.cpuBefore += x.cpuBefore
		r.cpuIdle += x.cpuIdle
		r.hwm += x.hwm
		r.rssMean += x.rssMean
		r.rssMax += x.rssMax
		r.anon += x.anon
		r.file += x.file
		r.pss += x.pss
		r.uss += x.uss
		r.shared += x.shared
		runs, peers = append(runs, x.hookRuns), append(peers, x.delivered)
	}
	k := int64(len(rs))
	r.cpuBefore /= time.Duration(k)
	r.cpuIdle /= time.Duration(k)
	r.hwm, r.rssMean, r.rssMax, r.anon, r.file = r.hwm/k, r.rssMean/k, r.rssMax/k, r.anon/k, r.file/k
	r.pss, r.uss, r.shared = r.pss/k, r.uss/k, r.shared/k
	r.runs, r.peers = spread(runs), spread(peers)
	return r
}

// spread is "n" when every value is n, else "min-max".
func spread(v []int) string {
	lo, hi := slices.Min(v), slices.Max(v)
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// memory prints each finder's shared and private memory (means over the
// window and the copies) and what its copies cost the node together
// (distinct[k], KiB, mean over the window; -1 unknown), then each finder's
// ratios to upstream's.
func memory(n, copies int, rows []row, distinct []int64) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "memory (%d peers, %d copies each)\tRSS\tPss\tUSS\tShared\tsum of Pss\tcopies together\tper member\t\n", n, copies)
	up := -1
	for k, r := range rows {
		if r.err != nil {
			continue
		}
		if r.name == upstreamName {
			up = k
		}
		together, per := "-", "-"
		if distinct[k] >= 0 {
			together, per = mib(distinct[k]), mib(distinct[k]/int64(copies))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.name, mib(r.rssMean), mib(r.pss), mib(r.uss), mib(r.shared),
			mib(r.pss*int64(copies)), together, per)
	}
	if up >= 0 {
		u := rows[up]
		fmt.Fprintf(w, "ratio to upstream\tRSS\tPss\tUSS\t\t\t\tper member\t\n")
		for k, r := range rows {
			if k == up || r.err != nil {
				continue
			}
			per := "-"
			if distinct[k] >= 0 && distinct[up] > 0 {
				per = ratio(distinct[k], distinct[up])
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\t\t\t%s\t\n", r.name, ratio(r.rssMean, u.rssMean), ratio(r.pss, u.pss), ratio(r.uss, u.uss), per)
		}
	}
	return w.Flush()
}

func ratio(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

// sample reads pid's CPU time and RSS over window.
func sample(pid int, window time.Duration) (result, error) {
	var r result
	c0, err := cpuTime(pid)
	if err != nil {
		return r, err
	}
	r.cpuBefore = c0
	var sum, pss, uss, shared int64
	count, err := eachSecond(window, func() error {
		st, err := status(pid)
		if err != nil {
			return err
		}
		sm, err := readSmaps(pid)
		if err != nil {
			return err
		}
		sum += st["VmRSS"]
		pss, uss, shared = pss+sm.pss, uss+sm.uss(), shared+sm.shared()
		r.rssMax = max(r.rssMax, st["VmRSS"])
		r.hwm = st["VmHWM"]
		r.anon, r.file = st["RssAnon"], st["RssFile"]
		return nil
	})
	if err != nil {
		return r, err
	}
	c1, err := cpuTime(pid)
	if err != nil {
		return r, err
	}
	r.cpuIdle = c1 - c0
	r.rssMean = sum / count
	r.pss, r.uss, r.shared = pss/count, uss/count, shared/count
	return r, nil
}

// cpuTime is utime+stime of pid (not of its children).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat: %w", err)
	}
	// The command name (field 2) may hold spaces: fields are counted after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/<pid>/stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("short /proc/<pid>/stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse stat: %w", err)
	}
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// status returns the kB fields of /proc/<pid>/status (VmRSS, VmHWM, ...).
func status(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("read status: %w", err)
	}
	out := make(map[string]int64)
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		v, isKB := strings.CutSuffix(strings.TrimSpace(v), " kB")
		if !ok || !isKB {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func cpu(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// createPods creates the headless service and n pods spread over the nodes.
func createPods(ctx context.Context, c kubernetes.Interface, ns string, n int) error {
	labels := map[string]string{"app": service}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: service}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "peer", Port: 2888}}}}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	nodes, err := benchkit.KwokNodes(ctx, c)
	if err != nil {
		return err
	}
	next := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				name := fmt.Sprintf("%s-%d", service, i)
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"test.flockd.io/ready-delay": "0s"}},
					Spec: corev1.PodSpec{Hostname: name, Subdomain: service, NodeName: nodes[i%len(nodes)],
						Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}},
				}
				if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- fmt.Errorf("create pod %s: %w", name, err):
					default:
					}
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// waitEndpoints waits until the service's EndpointSlices hold n ready endpoints.
func waitEndpoints(ctx context.Context, c kubernetes.Interface, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := -1
	for {
		list, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return fmt.Errorf("list endpointslices: %w", err)
		}
		ready := 0
		for _, es := range list.Items {
			for _, e := range es.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					ready++
				}
			}
		}
		if ready >= n {
			return nil
		}
		if ready != last {
			fmt.Fprintf(os.Stderr, "%d/%d endpoints ready\n", ready, n)
			last = ready
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d endpoints ready after %s", ready, n, timeout)
		}
		time.Sleep(time.Second)
	}
}
