// Command apiload measures the load that N flock peer-finders with
// -source=endpointslice, one in every member of one service (the sidecar
// case; default 100), put on the kube-apiserver, at steady state and during
// a rolling restart, and compares it with the DNS load of N upstream
// peer-finders (one SRV lookup per second each) on a CoreDNS of its own.
//
// It runs against the local cluster, whose environment it reads
// (KUBECONFIG, FLOCK_STATE_DIR, FLOCK_CLUSTER_DOMAIN,
// FLOCK_UPSTREAM_PEER_FINDER):
//
//	make bench-apiload    # = bin/flock-cluster exec -- go run ./bench/apiload
//
// # Method
//
// A StatefulSet "web" of N kwok pods behind a headless service. The finders
// run as real processes on this machine, finder i as web-i, each with the
// token of one service account (list,watch endpointslices) in a kubeconfig
// of its own. A FlowSchema of API Priority and Fairness matches exactly
// that service account, so the apiserver's own
// apiserver_flowcontrol_dispatched_requests_total{flow_schema=...} counts
// the finders' requests and nobody else's. Everything else is read from the
// apiserver's /metrics at both ends of each window: its CPU
// (process_cpu_seconds_total), the EndpointSlice watch events it sent and
// their bytes (apiserver_watch_events_total/_sizes), the EndpointSlice
// requests of every client (apiserver_request_total) and the open
// EndpointSlice watches (apiserver_longrunning_requests).
//
// Windows, one after the other:
//
//  1. idle, no finders (the apiserver's baseline CPU);
//  2. a rolling restart without finders (what the restart itself costs);
//  3. the finders start, until every hook saw N peers;
//  4. steady state with the finders (-steady);
//  5. a rolling restart with the finders, each finder restarted when its
//     pod is recreated, as a sidecar would be.
//
// The finders' share of the apiserver's CPU and bytes is window 4 minus
// window 1 (per minute) and window 5 minus window 2 (per restart).
//
// Then, as root, N upstream peer-finders (test/images/pets/peer-finder)
// poll the same service through benchkit's port-53 forwarder, which relays
// to a CoreDNS started for this window alone (the kubernetes plugin, TTL 0,
// and the prometheus plugin): its own coredns_dns_requests_total,
// coredns_dns_response_size_bytes and process CPU over -dns-window.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flockd/flock/bench/internal/benchkit"
	"github.com/flockd/flock/localcluster"
)

const (
	service    = "web"
	account    = "finder"
	flowSchema = "flock-bench-apiload"
)

func main() {
	n := flag.Int("finders", 100, "members of the service, each with a finder")
	steady := flag.Duration("steady", 3*time.Minute, "steady-state window with the finders running")
	idle := flag.Duration("idle", time.Minute, "baseline window without finders")
	dnsWindow := flag.Duration("dns-window", time.Minute, "window of the upstream peer-finders' DNS load")
	flag.Parse()
	if err := run(*n, *idle, *steady, *dnsWindow); err != nil {
		fmt.Fprintln(os.Stderr, "bench/apiload:", err)
		os.Exit(1)
	}
}

func run(n int, idle, steady, dnsWindow time.Duration) error {
	env, err := benchkit.LoadEnv("bench-apiload", 100)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "flock-bench-apiload-")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	defer os.RemoveAll(dir)
	ns, err := benchkit.Namespace(ctx, env.Client, "apiload")
	if ns != "" {
		defer func() {
			if err := benchkit.DeleteNamespace(env.Client, ns, 10*time.Minute); err != nil {
				fmt.Fprintln(os.Stderr, "bench/apiload:", err)
			}
		}()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "namespace %s, work dir %s\n", ns, dir)
	if err := setup(ctx, env.Client, ns, n); err != nil {
		return err
	}
	defer env.Client.FlowcontrolV1().FlowSchemas().Delete(context.Background(), flowSchema, metav1.DeleteOptions{})
	kubeconfig, err := finderKubeconfig(ctx, env, ns, dir)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := waitRollout(ctx, env.Client, ns, n, 5*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d pods ready after %s\n", n, time.Since(start).Round(time.Millisecond))
	pf, err := benchkit.BuildPeerFinder(dir)
	if err != nil {
		return err
	}

	m := apiMeter{c: env.Client}
	var windows []window
	measure := func(name string, f func() error) error {
		fmt.Fprintf(os.Stderr, "window: %s\n", name)
		w, err := m.measure(ctx, name, f)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		windows = append(windows, w)
		return nil
	}
	if err := measure("idle, no finders", func() error { time.Sleep(idle); return nil }); err != nil {
		return err
	}
	if err := measure("rolling restart, no finders", func() error { return rollingRestart(ctx, env.Client, ns, n, nil) }); err != nil {
		return err
	}

	spec := func(i int) benchkit.Spec {
		return benchkit.Spec{Name: fmt.Sprintf("web-%d", i), Argv: []string{pf, "-source=endpointslice", "-events=off",
			"-kubeconfig=" + kubeconfig, "-service=" + service, "-ns=" + ns, "-domain=" + env.Domain, fmt.Sprintf("-hostname=web-%d", i)}}
	}
	fleet := &fleet{dir: dir, spec: spec}
	defer fleet.stopAll()
	if err := measure("finders start until every hook saw all", func() error {
		for i := range n {
			if err := fleet.start(i); err != nil {
				return err
			}
		}
		return benchkit.WaitHooks(fleet.all(), n, 3*time.Minute)
	}); err != nil {
		return err
	}
	if err := measure("steady state, finders", func() error { time.Sleep(steady); return nil }); err != nil {
		return err
	}
	if err := measure("rolling restart, finders restarted with their pods", func() error {
		if err := rollingRestart(ctx, env.Client, ns, n, fleet.restart); err != nil {
			return err
		}
		return benchkit.WaitHooks(fleet.all(), n, 2*time.Minute)
	}); err != nil {
		return err
	}
	fleet.stopAll()
	printAPI(os.Stdout, n, windows)

	d, err := dnsLoad(ctx, env, ns, dir, n, dnsWindow)
	if err != nil {
		fmt.Fprintf(os.Stderr, "upstream DNS load not measured: %v\n", err)
		return nil
	}
	printDNS(os.Stdout, n, d, windows)
	return nil
}

// setup creates the finders' service account, role and FlowSchema, the
// headless service and the StatefulSet.
func setup(ctx context.Context, c kubernetes.Interface, ns string, n int) error {
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service account: %w", err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: account}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}}}}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create role: %w", err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: account},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: account},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}}}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create role binding: %w", err)
	}
	// Same priority level as any service account's requests get by
	// default (FlowSchema "service-accounts"), under a name of its own.
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: flowSchema}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
		MatchingPrecedence:         500,
		DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
				ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: account}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
				ClusterScope: true, Namespaces: []string{"*"}}},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
		}},
	}}
	_ = c.FlowcontrolV1().FlowSchemas().Delete(ctx, flowSchema, metav1.DeleteOptions{}) // an earlier run's
	if _, err := c.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create flow schema: %w", err)
	}

	labels := map[string]string{"app": service}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: service}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "peer", Port: 2888}}}}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	replicas := int32(n)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: service}, Spec: appsv1.StatefulSetSpec{
		Replicas: &replicas, ServiceName: service, PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}}},
	}}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create statefulset: %w", err)
	}
	return nil
}

// finderKubeconfig writes a kubeconfig for the finders' service account:
// the admin kubeconfig's server and CA with a token of that account.
func finderKubeconfig(ctx context.Context, env *benchkit.Env, ns, dir string) (string, error) {
	admin, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("load kubeconfig: %w", err)
	}
	cur := admin.Contexts[admin.CurrentContext]
	if cur == nil || admin.Clusters[cur.Cluster] == nil {
		return "", errors.New("admin kubeconfig: no current context")
	}
	cluster := admin.Clusters[cur.Cluster]
	exp := int64(3 * 3600)
	tok, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, account,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s: %w", account, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos[account] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["finder"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: account, Namespace: ns}
	cfg.CurrentContext = "finder"
	path := filepath.Join(dir, "finder.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// waitRollout waits until the StatefulSet's n pods are ready and at its
// update revision.
func waitRollout(ctx context.Context, c kubernetes.Interface, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		sts, err := c.AppsV1().StatefulSets(ns).Get(ctx, service, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get statefulset: %w", err)
		}
		st := sts.Status
		if st.ObservedGeneration >= sts.Generation && int(st.ReadyReplicas) == n && int(st.UpdatedReplicas) == n &&
			st.CurrentRevision == st.UpdateRevision {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("statefulset: %d ready, %d updated of %d after %s", st.ReadyReplicas, st.UpdatedReplicas, n, timeout)
		}
		time.Sleep(time.Second)
	}
}

// rollingRestart restarts the StatefulSet's pods one at a time (as kubectl
// rollout restart does: a template annotation, RollingUpdate) and waits
// until all n are ready again. onNew, if set, is called with the ordinal of
// each pod created anew.
func rollingRestart(ctx context.Context, c kubernetes.Interface, ns string, n int, onNew func(int) error) error {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var errs chan error
	if onNew != nil {
		// Watched from the list's resource version: only pods created from now on.
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + service})
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		w, err := c.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{LabelSelector: "app=" + service, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return fmt.Errorf("watch pods: %w", err)
		}
		errs = make(chan error, 1)
		go func() {
			defer close(errs)
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type != watch.Added {
					continue
				}
				i, err := strconv.Atoi(strings.TrimPrefix(p.Name, service+"-"))
				if err != nil {
					continue
				}
				if err := onNew(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, service, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("restart statefulset: %w", err)
	}
	start := time.Now()
	if err := waitRollout(ctx, c, ns, n, 15*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "rolling restart of %d pods took %s\n", n, time.Since(start).Round(time.Millisecond))
	stop()
	if errs != nil {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// fleet is the running finders, by ordinal.
type fleet struct {
	dir  string
	spec func(int) benchkit.Spec
	mu   sync.Mutex
	fs   map[int]*benchkit.Finder
}

func (f *fleet) start(i int) error {
	one, err := benchkit.StartOne(f.dir, i, f.spec(i))
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fs == nil {
		f.fs = make(map[int]*benchkit.Finder)
	}
	f.fs[i] = one
	return nil
}

// restarts counts the finders restarted with their pods.
var restarts atomic.Int64

// restart stops finder i and starts it again, as the sidecar of a
// recreated pod.
func (f *fleet) restart(i int) error {
	f.mu.Lock()
	old := f.fs[i]
	f.mu.Unlock()
	if old != nil {
		benchkit.Stop(old.Cmd)
	}
	restarts.Add(1)
	return f.start(i)
}

func (f *fleet) all() []*benchkit.Finder {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*benchkit.Finder, 0, len(f.fs))
	for i := range len(f.fs) {
		if one := f.fs[i]; one != nil {
			out = append(out, one)
		}
	}
	return out
}

func (f *fleet) stopAll() {
	fs := f.all()
	var wg sync.WaitGroup
	for _, one := range fs {
		wg.Go(func() { benchkit.Stop(one.Cmd) })
	}
	wg.Wait()
	f.mu.Lock()
	f.fs = nil
	f.mu.Unlock()
}

// window is what the apiserver's metrics moved by over one window.
type window struct {
	name     string
	elapsed  time.Duration
	cpu      float64            // apiserver CPU seconds
	finders  float64            // requests matched by the finders' FlowSchema
	byVerb   map[string]float64 // endpointslices requests of every client (a WATCH counts when it ends)
	events   float64            // EndpointSlice watch events sent
	bytes    float64            // their bytes
	respB    float64            // response bytes of endpointslices requests (LIST, GET)
	watchers float64            // open endpointslices watches at the end
	restarts int64              // finders restarted with their pods
}

// apiMeter reads the apiserver's /metrics.
type apiMeter struct{ c kubernetes.Interface }

func (m apiMeter) measure(ctx context.Context, name string, f func() error) (window, error) {
	before, err := m.scrape(ctx)
	if err != nil {
		return window{}, err
	}
	r0 := restarts.Load()
	t0 := time.Now()
	if err := f(); err != nil {
		return window{}, err
	}
	w := window{name: name, elapsed: time.Since(t0), restarts: restarts.Load() - r0}
	after, err := m.scrape(ctx)
	if err != nil {
		return window{}, err
	}
	d := func(metric string, match func(map[string]string) bool) float64 {
		return sum(after, metric, match) - sum(before, metric, match)
	}
	eps := func(l map[string]string) bool { return l["resource"] == "endpointslices" }
	w.cpu = d("process_cpu_seconds_total", nil)
	w.finders = d("apiserver_flowcontrol_dispatched_requests_total", func(l map[string]string) bool { return l["flow_schema"] == flowSchema })
	w.byVerb = make(map[string]float64)
	for _, verb := range []string{"LIST", "WATCH", "GET", "PUT", "POST", "PATCH", "DELETE"} {
		w.byVerb[verb] = d("apiserver_request_total", func(l map[string]string) bool { return eps(l) && l["verb"] == verb })
	}
	slices := func(l map[string]string) bool { return l["kind"] == "EndpointSlice" || eps(l) }
	w.events = d("apiserver_watch_events_total", slices)
	w.bytes = d("apiserver_watch_events_sizes", slices)
	// A WATCH's response size is recorded when it ends, all its events at
	// once: only LIST and GET here (watch bytes are the events' sizes).
	w.respB = d("apiserver_response_sizes", func(l map[string]string) bool { return eps(l) && (l["verb"] == "LIST" || l["verb"] == "GET") })
	w.watchers = sum(after, "apiserver_longrunning_requests", func(l map[string]string) bool { return eps(l) && l["verb"] == "WATCH" })
	return w, nil
}

func (m apiMeter) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	raw, err := m.c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver /metrics: %w", err)
	}
	return parse(raw)
}

func parse(raw []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return mf, nil
}

// sum adds up metric's samples whose labels match (all when match is nil):
// counters, gauges, and the sums of histograms.
func sum(mf map[string]*dto.MetricFamily, metric string, match func(map[string]string) bool) float64 {
	fam := mf[metric]
	if fam == nil {
		return 0
	}
	var total float64
	for _, s := range fam.GetMetric() {
		l := make(map[string]string)
		for _, lp := range s.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if match != nil && !match(l) {
			continue
		}
		switch {
		case s.Counter != nil:
			total += s.GetCounter().GetValue()
		case s.Gauge != nil:
			total += s.GetGauge().GetValue()
		case s.Histogram != nil:
			total += s.GetHistogram().GetSampleSum()
		case s.Untyped != nil:
			total += s.GetUntyped().GetValue()
		}
	}
	return total
}

func printAPI(out *os.File, n int, ws []window) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "apiserver, %d endpointslice finders\ttime\tfinders' requests\tper finder\tper finder per min\tapiserver CPU\tEndpointSlice watch events\tbytes\tLIST/GET bytes\tendpointslices WATCH/LIST/PUT/POST (all clients)\topen watches\tfinder restarts\t\n", n)
	for _, x := range ws {
		fmt.Fprintf(w, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.2fs\t%.0f\t%s\t%s\t%.0f/%.0f/%.0f/%.0f\t%.0f\t%d\t\n", x.name, x.elapsed.Round(time.Second), x.finders,
			x.finders/float64(n), x.finders/float64(n)/x.elapsed.Minutes(), x.cpu, x.events, size(x.bytes), size(x.respB),
			x.byVerb["WATCH"], x.byVerb["LIST"], x.byVerb["PUT"], x.byVerb["POST"], x.watchers, x.restarts)
	}
	_ = w.Flush()
	if len(ws) == 5 {
		idle, restart0, steady, restart1 := ws[0], ws[1], ws[3], ws[4]
		perMin := func(x window) float64 { return x.cpu / x.elapsed.Minutes() }
		fmt.Fprintf(out, "finders' share (with minus without, per finder): steady %.2f ms CPU/min, %s/min sent; rolling restart %.1f ms CPU, %s sent, %.1f requests\n",
			1000*(perMin(steady)-perMin(idle))/float64(n),
			size(((steady.bytes+steady.respB)/steady.elapsed.Minutes()-(idle.bytes+idle.respB)/idle.elapsed.Minutes())/float64(n)),
			1000*(restart1.cpu-restart0.cpu)/float64(n), size((restart1.bytes+restart1.respB-restart0.bytes-restart0.respB)/float64(n)),
			restart1.finders/float64(n))
	}
}

// dnsResult is what N upstream peer-finders cost a CoreDNS of their own.
type dnsResult struct {
	elapsed          time.Duration
	queries, bytes   float64
	cpu              float64
	byProto          map[string]float64
	delivered, total int
}

// dnsLoad starts a CoreDNS serving the cluster (kubernetes plugin, TTL 0)
// with the prometheus plugin, points benchkit's forwarder at it, runs n
// upstream peer-finders and reads CoreDNS's counters over window.
func dnsLoad(ctx context.Context, env *benchkit.Env, ns, dir string, n int, window time.Duration) (*dnsResult, error) {
	if env.Upstream == "" {
		return nil, errors.New("FLOCK_UPSTREAM_PEER_FINDER not set")
	}
	root, err := localcluster.CacheRoot()
	if err != nil {
		return nil, err
	}
	var bin string
	for _, c := range localcluster.Components {
		if c.Name == "coredns" {
			bin = c.Bin(root, "coredns")
		}
	}
	if bin == "" {
		return nil, errors.New("no coredns component")
	}
	ports, err := localcluster.FreePorts(2)
	if err != nil {
		return nil, err
	}
	addr, metrics := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	corefile := fmt.Sprintf(".:%d {\n    bind 127.0.0.1\n    errors\n    prometheus %s\n    kubernetes %s {\n        kubeconfig %s\n        pods insecure\n        ttl 0\n    }\n}\n",
		ports[0], metrics, env.Domain, env.Kubeconfig)
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		return nil, fmt.Errorf("write Corefile: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "coredns.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-conf="+cf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start coredns: %w", err)
	}
	defer benchkit.Stop(cmd)
	name := fmt.Sprintf("%s.%s.svc.%s.", service, ns, env.Domain)
	if err := waitDNS(addr, name, n, time.Minute); err != nil {
		return nil, err
	}
	stopFwd, err := benchkit.Forward(addr)
	if err != nil {
		return nil, err
	}
	defer stopFwd()
	var specs []benchkit.Spec
	for i := range n {
		self := fmt.Sprintf("web-%d", i)
		argv, err := benchkit.UpstreamArgv(filepath.Join(dir), ns, env.Domain, self, env.Upstream, "-service="+service, "-ns="+ns, "-domain="+env.Domain)
		if err != nil {
			return nil, err
		}
		specs = append(specs, benchkit.Spec{Name: "upstream " + self, Argv: argv})
	}
	udir := filepath.Join(dir, "upstream")
	if err := os.Mkdir(udir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "window: %d upstream peer-finders, %s\n", n, window)
	finders, err := benchkit.Start(udir, specs)
	defer benchkit.StopAll(finders)
	if err != nil {
		return nil, err
	}
	if err := benchkit.WaitHooks(finders, n, 2*time.Minute); err != nil {
		fmt.Fprintf(os.Stderr, "upstream: %v\n", err)
	}
	scrape := func() (map[string]*dto.MetricFamily, error) {
		resp, err := httpGet("http://" + metrics + "/metrics")
		if err != nil {
			return nil, err
		}
		return parse(resp)
	}
	before, err := scrape()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	time.Sleep(window)
	after, err := scrape()
	if err != nil {
		return nil, err
	}
	r := &dnsResult{elapsed: time.Since(t0), byProto: make(map[string]float64), total: n}
	d := func(metric string, match func(map[string]string) bool) float64 {
		return sum(after, metric, match) - sum(before, metric, match)
	}
	r.queries = d("coredns_dns_requests_total", nil)
	r.bytes = d("coredns_dns_response_size_bytes", nil)
	r.cpu = d("process_cpu_seconds_total", nil)
	for _, p := range []string{"udp", "tcp"} {
		r.byProto[p] = d("coredns_dns_requests_total", func(l map[string]string) bool { return l["proto"] == p })
	}
	for _, f := range finders {
		runs, _ := benchkit.ReadRuns(f.Log)
		if len(runs) > 0 && runs[len(runs)-1].Peers == n {
			r.delivered++
		}
	}
	return r, nil
}

func printDNS(out *os.File, n int, d *dnsResult, ws []window) {
	min := d.elapsed.Minutes()
	fmt.Fprintf(out, "CoreDNS, %d upstream peer-finders (%d delivered all %d) over %s: %.0f queries (udp %.0f, tcp %.0f) = %.1f per finder per min, CPU %.2fs = %.1f ms per finder per min, %s sent = %s per finder per min\n",
		n, d.delivered, n, d.elapsed.Round(time.Second), d.queries, d.byProto["udp"], d.byProto["tcp"], d.queries/float64(n)/min,
		d.cpu, 1000*d.cpu/float64(n)/min, size(d.bytes), size(d.bytes/float64(n)/min))
	if len(ws) == 5 {
		steady := ws[3]
		fmt.Fprintf(out, "steady state per finder per min: flock endpointslice %.2f API requests, upstream %.1f DNS queries\n",
			steady.finders/float64(n)/steady.elapsed.Minutes(), d.queries/float64(n)/min)
	}
}

func waitDNS(addr, name string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeSRV)
	for {
		resp, _, err := c.Exchange(m, addr)
		if err == nil && resp.Rcode == dns.RcodeSuccess && len(resp.Answer) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("coredns on %s: no answer with %d SRV records for %s within %s (last error %v)", addr, n, name, timeout, err) //nolint:errorlint // err is nil when the answer had too few records
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func size(b float64) string {
	switch {
	case b >= 1<<20 || b <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10 || b <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func httpGet(url string) ([]byte, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
