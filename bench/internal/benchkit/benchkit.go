// Package benchkit is what the benchmarks under bench/ share: the local
// cluster's environment, a namespace per run, building flock's peer-finder,
// running finders as processes with a recording -on-change hook, and
// pointing Kubernetes' upstream peer-finder at the cluster's CoreDNS.
//
// # Pointing upstream peer-finder at CoreDNS
//
// Upstream calls net.LookupSRV with the short service name, so it uses the
// machine's /etc/resolv.conf (search list and nameservers, always port 53).
// LOCALDOMAIN would change only the search list and RES_OPTIONS only the
// options, and the local CoreDNS listens on a random loopback port. So the
// benchmarks (as root) serve a tiny DNS forwarder on ForwarderAddr that
// relays every query to CoreDNS (Forward), and start upstream in new mount
// and UTS namespaces (UpstreamArgv: unshare --mount --uts) where a generated
// resolv.conf (search <ns>.svc.<domain> ..., nameserver 127.0.0.153) is
// bind-mounted over /etc/resolv.conf and the host name is set to the self
// name (upstream takes its own name from the host name). flock's DNS finder
// uses the same forwarder via -dns-server.
package benchkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ForwarderAddr is where Forward serves DNS; port 53 because upstream's
// resolver knows no other.
const ForwarderAddr = "127.0.0.153:53"

// Env is the local cluster as bin/flock-cluster exec describes it.
type Env struct {
	Kubeconfig string
	DNS        string // CoreDNS host:port
	Domain     string
	Upstream   string // upstream peer-finder binary; empty when not built
	Client     kubernetes.Interface
}

// LoadEnv reads KUBECONFIG, FLOCK_DNS, FLOCK_CLUSTER_DOMAIN and
// FLOCK_UPSTREAM_PEER_FINDER and builds a client allowed qps requests per
// second. target names the make target for the error message.
func LoadEnv(target string, qps float32) (*Env, error) {
	e := &Env{Kubeconfig: os.Getenv("KUBECONFIG"), DNS: os.Getenv("FLOCK_DNS"), Domain: os.Getenv("FLOCK_CLUSTER_DOMAIN"), Upstream: os.Getenv("FLOCK_UPSTREAM_PEER_FINDER")}
	if e.Kubeconfig == "" || e.DNS == "" || e.Domain == "" {
		return nil, fmt.Errorf("KUBECONFIG, FLOCK_DNS and FLOCK_CLUSTER_DOMAIN must point at the local cluster; run: make %s", target)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, int(2*qps)
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return e, nil
}

// Namespace creates a namespace named prefix-<random> and waits for its
// default service account. It first waits (up to 10 minutes) until no
// namespace is terminating: an earlier run's terminating pods still count
// against the kwok nodes' 110-pod capacity, so the scheduler would not place
// this run's pods.
func Namespace(ctx context.Context, c kubernetes.Interface, prefix string) (string, error) {
	if err := waitNoTerminating(ctx, c, 10*time.Minute); err != nil {
		return "", err
	}
	nsObj, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace: %w", err)
	}
	for {
		if _, err := c.CoreV1().ServiceAccounts(nsObj.Name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nsObj.Name, nil
		}
		select {
		case <-ctx.Done():
			return nsObj.Name, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitNoTerminating waits until no namespace is terminating.
func waitNoTerminating(ctx context.Context, c kubernetes.Interface, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	said := ""
	for {
		list, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list namespaces: %w", err)
		}
		var terminating []string
		for _, ns := range list.Items {
			if ns.Status.Phase == corev1.NamespaceTerminating {
				terminating = append(terminating, ns.Name)
			}
		}
		if len(terminating) == 0 {
			return nil
		}
		if s := fmt.Sprint(terminating); s != said {
			fmt.Fprintf(os.Stderr, "waiting for terminating namespaces %s to be gone\n", s)
			said = s
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespaces %v still terminating after %s", terminating, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// DeleteNamespace deletes namespace ns and waits until it is gone, so that
// the next benchmark finds the kwok nodes empty. Its pods are deleted with
// grace period 0 after the namespace (so that no controller recreates
// them): kwok would otherwise finalize thousands of them one by one, and
// until then they count against their nodes' capacity.
func DeleteNamespace(c kubernetes.Interface, ns string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	zero := int64(0)
	// Thousands of pods outlast the apiserver's request timeout (it goes on
	// deleting them): only the namespace being gone counts.
	if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "delete the pods of %s: %v (waiting for the namespace to be gone)\n", ns, err)
	}
	for {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "namespace %s deleted in %s\n", ns, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not gone after %s (last error: %v)", ns, timeout, err) //nolint:errorlint // err is nil while the namespace still exists
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// KwokNodes returns the names of the simulated nodes.
func KwokNodes(ctx context.Context, c kubernetes.Interface) ([]string, error) {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	if len(names) == 0 {
		return nil, errors.New("the cluster has no kwok nodes (label type=kwok)")
	}
	return names, nil
}

// BuildPeerFinder builds ./cmd/peer-finder into dir as the image ships it
// (static, trimmed paths, no symbol tables: `make images`) and returns its
// path.
func BuildPeerFinder(dir string) (string, error) {
	pf := filepath.Join(dir, "peer-finder")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", pf, "./cmd/peer-finder")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build peer-finder: %w", err)
	}
	return pf, nil
}

// UpstreamArgv returns the command line that runs upstream peer-finder
// (binary) as self, resolving through ForwarderAddr with the search list of
// namespace ns; it writes the resolv.conf into dir. args follow the binary.
func UpstreamArgv(dir, ns, domain, self, binary string, args ...string) ([]string, error) {
	resolv := filepath.Join(dir, "resolv.conf")
	body := fmt.Sprintf("search %s.svc.%s svc.%s %s\nnameserver %s\noptions ndots:5\n", ns, domain, domain, domain, strings.Split(ForwarderAddr, ":")[0])
	if err := os.WriteFile(resolv, []byte(body), 0o644); err != nil {
		return nil, fmt.Errorf("write resolv.conf: %w", err)
	}
	return append([]string{"unshare", "--mount", "--uts", "--", "sh", "-c",
		`hostname "$0" && mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`,
		self, resolv, binary}, args...), nil
}

// Spec is a finder to start: a name for the table and its command line
// (without -on-change).
type Spec struct {
	Name string
	Argv []string
}

// Finder is a running peer finder whose hook appends
// "<$EPOCHREALTIME> <peers on stdin>" to Log on every run.
type Finder struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
}

// Start starts each spec in its own process group with an -on-change hook
// recording into dir; output goes to dir/finder-<i>.log. On error the
// finders already started are returned too, for StopAll.
func Start(dir string, specs []Spec) ([]*Finder, error) {
	var fs []*Finder
	for i, s := range specs {
		f, err := StartOne(dir, i, s)
		if err != nil {
			return fs, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// StartOne starts spec as finder i of dir (see Start). Starting i again
// (a restarted sidecar) appends to the same hook log and output.
func StartOne(dir string, i int, s Spec) (*Finder, error) {
	f := &Finder{Name: s.Name, Log: filepath.Join(dir, fmt.Sprintf("hook-%d.log", i))}
	hook := filepath.Join(dir, fmt.Sprintf("hook-%d.sh", i))
	script := fmt.Sprintf("#!/bin/bash\nt=$EPOCHREALTIME\nn=$(grep -c '')\necho \"$t $n\" >> %q\n", f.Log)
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		return nil, fmt.Errorf("write hook: %w", err)
	}
	argv := append(slices.Clone(s.Argv), "-on-change="+hook)
	out, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("finder-%d.log", i)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("finder log: %w", err)
	}
	defer out.Close() // the child has its own copy
	f.Cmd = exec.Command(argv[0], argv[1:]...)
	f.Cmd.Stdout, f.Cmd.Stderr = out, out
	f.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := f.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	return f, nil
}

// StopAll stops every finder.
func StopAll(fs []*Finder) {
	for _, f := range fs {
		Stop(f.Cmd)
	}
}

// Stop ends a finder's whole process group (the finder and its hooks), or
// the process alone when it leads no group of its own.
func Stop(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	kill := func(sig syscall.Signal) {
		if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
			_ = cmd.Process.Signal(sig)
		}
	}
	kill(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		kill(syscall.SIGKILL)
		<-done
	}
}

// HookTimes waits until every finder's hook last saw want peers and returns,
// per finder, the start of its first run since after that saw want peers.
func HookTimes(fs []*Finder, want int, after time.Time, timeout time.Duration) (map[string]time.Time, error) {
	deadline := time.Now().Add(timeout)
	out := make(map[string]time.Time)
	for {
		for _, f := range fs {
			if _, ok := out[f.Name]; ok {
				continue
			}
			runs, err := ReadRuns(f.Log)
			if err != nil {
				return nil, err
			}
			for _, r := range runs {
				if r.At.After(after) && r.Peers == want {
					out[f.Name] = r.At
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
				if _, ok := out[f.Name]; !ok {
					missing = append(missing, f.Name)
				}
			}
			return nil, fmt.Errorf("no hook run with %d peers from %v within %s", want, missing, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitHooks waits until every finder's latest hook run saw want peers.
func WaitHooks(fs []*Finder, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var behind []string
		for _, f := range fs {
			runs, err := ReadRuns(f.Log)
			if err != nil {
				return err
			}
			if len(runs) == 0 || runs[len(runs)-1].Peers != want {
				last := "no run"
				if len(runs) > 0 {
					last = strconv.Itoa(runs[len(runs)-1].Peers)
				}
				behind = append(behind, f.Name+" ("+last+")")
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hooks of %v did not see %d peers within %s", behind, want, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Run is one run of a hook.
type Run struct {
	At    time.Time
	Peers int
}

// ReadRuns reads a hook log; a missing log has no runs.
func ReadRuns(path string) ([]Run, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hook log: %w", err)
	}
	defer f.Close()
	var runs []Run
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
		runs = append(runs, Run{At: time.Unix(whole, int64((sec-float64(whole))*1e9)), Peers: peers})
	}
	return runs, sc.Err()
}

// Forward serves DNS on ForwarderAddr (UDP and TCP), relaying to upstream
// over the same transport. It needs root (port 53).
func Forward(upstream string) (stop func(), err error) {
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
		resp.Compress = true // as CoreDNS sent it; uncompressed it may not fit
		if c.Net == "udp" {
			// Fit the client's buffer (512 bytes, or its EDNS0 size) and set
			// TC so that it retries over TCP, as a real server does.
			size := dns.MinMsgSize
			if opt := r.IsEdns0(); opt != nil {
				size = max(size, int(opt.UDPSize()))
			}
			resp.Truncate(size)
		}
		_ = w.WriteMsg(resp)
	})
	var servers []*dns.Server
	var wg sync.WaitGroup
	for _, netw := range []string{"udp", "tcp"} {
		started := make(chan error, 1)
		s := &dns.Server{Addr: ForwarderAddr, Net: netw, Handler: handler, NotifyStartedFunc: func() { started <- nil }}
		wg.Go(func() {
			if err := s.ListenAndServe(); err != nil {
				started <- err
			}
		})
		if err := <-started; err != nil {
			for _, s := range servers {
				_ = s.Shutdown()
			}
			return nil, fmt.Errorf("DNS forwarder on %s (needs root): %w", ForwarderAddr, err)
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

// PodReadyTimes reports each time the benchmark's own watch sees pod turn
// Ready (not on the first event when it already is), watching again after
// an error until ctx ends.
func PodReadyTimes(ctx context.Context, c kubernetes.Interface, ns, pod string) <-chan time.Time {
	out := make(chan time.Time, 16)
	go func() {
		was := true
		for ctx.Err() == nil {
			w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod})
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
					out <- now
				}
				was = ready
			}
		}
	}()
	return out
}
