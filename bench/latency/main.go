// Command latency measures, side by side in one run, how long each way of
// discovering peers takes from a pod becoming ready to the hook starting:
// flock's peer-finder with -source=endpointslice, -source=pods and
// -source=dns (through the cluster's CoreDNS), and Kubernetes' own
// peer-finder (test/images/pets/peer-finder, built at the local control
// plane's version) through the same CoreDNS.
//
// It runs against the local cluster, whose environment it reads
// (KUBECONFIG, FLOCK_DNS, FLOCK_CLUSTER_DOMAIN, FLOCK_UPSTREAM_PEER_FINDER):
//
//	make bench-latency    # = bin/flock-cluster exec -- go run ./bench/latency
//
// # Method
//
// A headless service "bench" (without publishNotReadyAddresses) selects a
// StatefulSet of 4 pods. All four finders run as real processes with
// -on-change pointing at a bash hook that records $EPOCHREALTIME (no fork)
// and the number of peers on stdin. Each round makes bench-3 not ready,
// waits until every hook saw 3 peers, waits a random 0-1s (so the 1s poll of
// the DNS finders is not phase-locked to the change), makes bench-3 ready
// and waits until every hook saw 4 peers. The latency of a finder is its
// hook's start minus t0, the moment the benchmark's own pod watch sees
// bench-3's Ready condition turn True. The EndpointSlice update follows t0
// (the EndpointSlice controller reacts to the pod); its lag is printed too.
//
// # Pointing upstream peer-finder at CoreDNS
//
// Upstream calls net.LookupSRV with the short service name, so it uses the
// machine's /etc/resolv.conf (search list and nameservers, always port 53).
// LOCALDOMAIN would change only the search list and RES_OPTIONS only the
// options, and the local CoreDNS listens on a random loopback port. So the
// benchmark (as root) serves a tiny DNS forwarder on 127.0.0.153:53 that
// relays every query to CoreDNS, and starts upstream in new mount and UTS
// namespaces (unshare --mount --uts) where a generated resolv.conf (search
// <ns>.svc.<domain> ..., nameserver 127.0.0.153) is bind-mounted over
// /etc/resolv.conf and the host name is set to bench-0 (upstream takes its
// own name from the host name). flock's DNS finder uses the same forwarder
// via -dns-server. The local CoreDNS has no cache plugin and TTL 0; a
// production CoreDNS ("cache 30") adds up to 30s to both DNS finders.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	forwarderAddr = "127.0.0.153:53"
	service       = "bench"
	replicas      = 4
	member        = "bench-3" // the pod toggled
	self          = "bench-0"
)

func main() {
	rounds := flag.Int("rounds", 30, "measured rounds")
	keep := flag.Bool("keep", false, "keep the namespace and work dir")
	flag.Parse()
	if err := run(*rounds, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench/latency:", err)
		os.Exit(1)
	}
}

type finder struct {
	name string
	cmd  *exec.Cmd
	log  string // hook log: "<epoch seconds> <peers>" per run
}

func run(rounds int, keep bool) error {
	kubeconfig, dnsAddr, domain, upstream := os.Getenv("KUBECONFIG"), os.Getenv("FLOCK_DNS"), os.Getenv("FLOCK_CLUSTER_DOMAIN"), os.Getenv("FLOCK_UPSTREAM_PEER_FINDER")
	if kubeconfig == "" || dnsAddr == "" || domain == "" {
		return errors.New("KUBECONFIG, FLOCK_DNS and FLOCK_CLUSTER_DOMAIN must point at the local cluster; run: make bench-latency")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dir, err := os.MkdirTemp("", "flock-bench-latency-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	ns, err := setup(ctx, client)
	if err != nil {
		return err
	}
	if !keep {
		defer client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}
	fmt.Fprintf(os.Stderr, "namespace %s, work dir %s\n", ns, dir)

	stopFwd, err := forward(dnsAddr)
	if err != nil {
		return fmt.Errorf("DNS forwarder on %s (needs root): %w", forwarderAddr, err)
	}
	defer stopFwd()

	pf := filepath.Join(dir, "peer-finder")
	build := exec.Command("go", "build", "-o", pf, "./cmd/peer-finder")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build peer-finder: %w", err)
	}
	common := []string{"-service=" + service, "-ns=" + ns, "-domain=" + domain, "-hostname=" + self}
	specs := []struct {
		name string
		argv []string
	}{
		{"flock endpointslice", append([]string{pf, "-source=endpointslice", "-kubeconfig=" + kubeconfig}, common...)},
		{"flock pods", append([]string{pf, "-source=pods", "-selector=app=" + service, "-kubeconfig=" + kubeconfig}, common...)},
		{"flock dns", append([]string{pf, "-source=dns", "-dns-server=" + forwarderAddr}, common...)},
	}
	if upstream != "" {
		resolv := filepath.Join(dir, "resolv.conf")
		body := fmt.Sprintf("search %s.svc.%s svc.%s %s\nnameserver %s\noptions ndots:5\n", ns, domain, domain, domain, strings.Split(forwarderAddr, ":")[0])
		if err := os.WriteFile(resolv, []byte(body), 0o644); err != nil {
			return err
		}
		specs = append(specs, struct {
			name string
			argv []string
		}{"upstream peer-finder", []string{"unshare", "--mount", "--uts", "--", "sh", "-c",
			`hostname "$0" && mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`,
			self, resolv, upstream, "-service=" + service, "-ns=" + ns, "-domain=" + domain}})
	} else {
		fmt.Fprintln(os.Stderr, "FLOCK_UPSTREAM_PEER_FINDER not set: upstream peer-finder skipped")
	}
	var finders []*finder
	defer func() {
		for _, f := range finders {
			stop(f.cmd)
		}
	}()
	for i, s := range specs {
		f := &finder{name: s.name, log: filepath.Join(dir, fmt.Sprintf("hook-%d.log", i))}
		hook := filepath.Join(dir, fmt.Sprintf("hook-%d.sh", i))
		script := fmt.Sprintf("#!/bin/bash\nt=$EPOCHREALTIME\nn=$(grep -c '')\necho \"$t $n\" >> %q\n", f.log)
		if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
			return err
		}
		argv := append(slices.Clone(s.argv), "-on-change="+hook)
		out, err := os.Create(filepath.Join(dir, fmt.Sprintf("finder-%d.log", i)))
		if err != nil {
			return err
		}
		f.cmd = exec.Command(argv[0], argv[1:]...)
		f.cmd.Stdout, f.cmd.Stderr = out, out
		f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := f.cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		finders = append(finders, f)
	}
	if err := waitHooks(finders, replicas, 60*time.Second); err != nil {
		return fmt.Errorf("initial delivery: %w (logs in %s)", err, dir)
	}

	podReady, sliceReady := watchReady(ctx, client, ns)
	lat := make(map[string][]time.Duration)
	var lag []time.Duration
	for r := 0; r < rounds; r++ {
		if err := setReady(ctx, client, ns, false); err != nil {
			return err
		}
		if err := waitHooks(finders, replicas-1, 60*time.Second); err != nil {
			return fmt.Errorf("round %d, not ready: %w", r, err)
		}
		drain(podReady)
		drain(sliceReady)
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		if err := setReady(ctx, client, ns, true); err != nil {
			return err
		}
		var t0, ts time.Time
		select {
		case t0 = <-podReady:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("round %d: %s never turned ready", r, member)
		}
		select {
		case ts = <-sliceReady:
			lag = append(lag, ts.Sub(t0))
		case <-time.After(30 * time.Second):
			return fmt.Errorf("round %d: the EndpointSlice never showed %s ready", r, member)
		}
		got, err := hookTimes(finders, replicas, t0.Add(-2*time.Second), 60*time.Second)
		if err != nil {
			return fmt.Errorf("round %d, ready: %w", r, err)
		}
		for name, t := range got {
			lat[name] = append(lat[name], t.Sub(t0))
		}
		fmt.Fprintf(os.Stderr, "round %d/%d done\n", r+1, rounds)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "finder\tp50\tp99\tmax\trounds\t\n")
	for _, f := range finders {
		d := lat[f.name]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t\n", f.name, pct(d, 50), pct(d, 99), pct(d, 100), len(d))
	}
	fmt.Fprintf(w, "(EndpointSlice lag after the pod)\t%s\t%s\t%s\t%d\t\n", pct(lag, 50), pct(lag, 99), pct(lag, 100), len(lag))
	return w.Flush()
}

func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100 // nearest rank
	i = min(max(i, 1), len(s)) - 1
	v := s[i]
	if v < time.Second {
		return fmt.Sprintf("%.1fms", float64(v)/float64(time.Millisecond))
	}
	return v.Round(time.Millisecond).String()
}

func setup(ctx context.Context, c kubernetes.Interface) (string, error) {
	nsObj, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-latency-"}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	ns := nsObj.Name
	for {
		if _, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	labels := map[string]string{"app": service}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: service}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "peer", Port: 2888}}}}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return ns, err
	}
	n := int32(replicas)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: service}, Spec: appsv1.StatefulSetSpec{
		Replicas: &n, ServiceName: service, PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}}},
	}}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return ns, err
	}
	return ns, nil
}

func setReady(ctx context.Context, c kubernetes.Interface, ns string, ready bool) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.flockd.io/ready":"%v"}}}`, ready)
	_, err := c.CoreV1().Pods(ns).Patch(ctx, member, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	return err
}

// watchReady reports when the benchmark sees the member's pod turn Ready
// and its endpoint turn ready.
func watchReady(ctx context.Context, c kubernetes.Interface, ns string) (pod, slice <-chan time.Time) {
	podC, sliceC := make(chan time.Time, 16), make(chan time.Time, 16)
	go func() {
		was := true
		for ctx.Err() == nil {
			w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + member})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				now := time.Now()
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				ready := false
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady {
						ready = cond.Status == corev1.ConditionTrue
					}
				}
				if ready && !was {
					podC <- now
				}
				was = ready
			}
		}
	}()
	go func() {
		was := true
		for ctx.Err() == nil {
			w, err := c.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				now := time.Now()
				es, ok := ev.Object.(*discoveryv1.EndpointSlice)
				if !ok {
					continue
				}
				ready := false
				for _, e := range es.Endpoints {
					if e.Hostname != nil && *e.Hostname == member && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
						ready = true
					}
				}
				if ready && !was {
					sliceC <- now
				}
				was = ready
			}
		}
	}()
	return podC, sliceC
}

func drain(c <-chan time.Time) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// hookTimes waits until every finder's hook last saw want peers and returns,
// per finder, the start of its first run since after that saw want peers.
func hookTimes(fs []*finder, want int, after time.Time, timeout time.Duration) (map[string]time.Time, error) {
	deadline := time.Now().Add(timeout)
	out := make(map[string]time.Time)
	for {
		for _, f := range fs {
			if _, ok := out[f.name]; ok {
				continue
			}
			runs, err := readRuns(f.log)
			if err != nil {
				return nil, err
			}
			for _, r := range runs {
				if r.at.After(after) && r.peers == want {
					out[f.name] = r.at
					break
				}
			}
		}
		if len(out) == len(fs) {
			return out, nil
		}
		if time.Now().After(deadline) {
			var missing []string
			for _, f := range fs {
				if _, ok := out[f.name]; !ok {
					missing = append(missing, f.name)
				}
			}
			return nil, fmt.Errorf("no hook run with %d peers from %v within %s", want, missing, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitHooks waits until every finder's latest hook run saw want peers.
func waitHooks(fs []*finder, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		done := 0
		for _, f := range fs {
			runs, err := readRuns(f.log)
			if err != nil {
				return err
			}
			if len(runs) > 0 && runs[len(runs)-1].peers == want {
				done++
			}
		}
		if done == len(fs) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every hook saw %d peers within %s", want, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type hookRun struct {
	at    time.Time
	peers int
}

func readRuns(path string) ([]hookRun, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []hookRun
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ts, n, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue // a line being written
		}
		sec, err1 := strconv.ParseFloat(ts, 64)
		peers, err2 := strconv.Atoi(n)
		if err1 != nil || err2 != nil {
			continue
		}
		whole := int64(sec)
		runs = append(runs, hookRun{at: time.Unix(whole, int64((sec-float64(whole))*1e9)), peers: peers})
	}
	return runs, sc.Err()
}

// forward serves DNS on forwarderAddr (UDP and TCP), relaying to upstream.
func forward(upstream string) (stop func(), err error) {
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, UDPSize: 4096}
		if w.RemoteAddr().Network() == "tcp" {
			c.Net = "tcp"
		}
		resp, _, err := c.Exchange(r, upstream)
		if err != nil {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeServerFailure)
			_ = w.WriteMsg(m)
			return
		}
		_ = w.WriteMsg(resp)
	})
	var servers []*dns.Server
	var wg sync.WaitGroup
	for _, netw := range []string{"udp", "tcp"} {
		started := make(chan error, 1)
		s := &dns.Server{Addr: forwarderAddr, Net: netw, Handler: handler, NotifyStartedFunc: func() { started <- nil }}
		wg.Go(func() {
			if err := s.ListenAndServe(); err != nil {
				started <- err
			}
		})
		if err := <-started; err != nil {
			for _, s := range servers {
				_ = s.Shutdown()
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	return func() {
		for _, s := range servers {
			_ = s.Shutdown()
		}
		wg.Wait()
	}, nil
}

// stop ends a finder's whole process group (the finder and its hooks).
func stop(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
