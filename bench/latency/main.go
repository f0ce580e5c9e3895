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
// As root, through a DNS forwarder on port 53 and a bind-mounted
// resolv.conf in a mount namespace: see package bench/internal/benchkit.
// The local CoreDNS has no cache plugin and TTL 0; a production
// CoreDNS ("cache 30") adds up to 30s to both DNS finders.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flockd/flock/bench/internal/benchkit"
)

const (
	service  = "bench"
	replicas = 4
	member   = "bench-3" // the pod toggled
	self     = "bench-0"
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

func run(rounds int, keep bool) error {
	env, err := benchkit.LoadEnv("bench-latency", 100)
	if err != nil {
		return err
	}
	client, kubeconfig, domain, upstream := env.Client, env.Kubeconfig, env.Domain, env.Upstream
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
	if ns != "" && !keep {
		defer func() {
			if err := benchkit.DeleteNamespace(client, ns, 5*time.Minute); err != nil {
				fmt.Fprintln(os.Stderr, "bench/latency:", err)
			}
		}()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "namespace %s, work dir %s\n", ns, dir)

	stopFwd, err := benchkit.Forward(env.DNS)
	if err != nil {
		return err
	}
	defer stopFwd()

	pf, err := benchkit.BuildPeerFinder(dir)
	if err != nil {
		return err
	}
	common := []string{"-service=" + service, "-ns=" + ns, "-domain=" + domain, "-hostname=" + self}
	specs := []benchkit.Spec{
		{Name: "flock endpointslice", Argv: append([]string{pf, "-source=endpointslice", "-kubeconfig=" + kubeconfig}, common...)},
		{Name: "flock pods", Argv: append([]string{pf, "-source=pods", "-selector=app=" + service, "-kubeconfig=" + kubeconfig}, common...)},
		{Name: "flock dns", Argv: append([]string{pf, "-source=dns", "-dns-server=" + benchkit.ForwarderAddr}, common...)},
	}
	if upstream != "" {
		argv, err := benchkit.UpstreamArgv(dir, ns, domain, self, upstream, "-service="+service, "-ns="+ns, "-domain="+domain)
		if err != nil {
			return err
		}
		specs = append(specs, benchkit.Spec{Name: "upstream peer-finder", Argv: argv})
	} else {
		fmt.Fprintln(os.Stderr, "FLOCK_UPSTREAM_PEER_FINDER not set: upstream peer-finder skipped")
	}
	finders, err := benchkit.Start(dir, specs)
	defer benchkit.StopAll(finders)
	if err != nil {
		return err
	}
	if err := benchkit.WaitHooks(finders, replicas, 60*time.Second); err != nil {
		return fmt.Errorf("initial delivery: %w (logs in %s)", err, dir)
	}

	podReady, sliceReady := watchReady(ctx, client, ns)
	lat := make(map[string][]time.Duration)
	var lag []time.Duration
	for r := 0; r < rounds; r++ {
		if err := setReady(ctx, client, ns, false); err != nil {
			return err
		}
		if err := benchkit.WaitHooks(finders, replicas-1, 60*time.Second); err != nil {
			return fmt.Errorf("round %d, not ready: %w", r, err)
		}
		// Every hook's latest run saw 3 peers: a later run with 4 is this round's.
		down := time.Now()
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
		got, err := benchkit.HookTimes(finders, replicas, down, 60*time.Second)
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
		d := lat[f.Name]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t\n", f.Name, benchkit.Latency(d, 50), benchkit.Latency(d, 99), benchkit.Latency(d, 100), len(d))
	}
	fmt.Fprintf(w, "(EndpointSlice lag after the pod)\t%s\t%s\t%s\t%d\t\n", benchkit.Latency(lag, 50), benchkit.Latency(lag, 99), benchkit.Latency(lag, 100), len(lag))
	return w.Flush()
}

func setup(ctx context.Context, c kubernetes.Interface) (string, error) {
	ns, err := benchkit.Namespace(ctx, c, "bench-latency")
	if err != nil {
		return ns, err
	}
	// Placed by the benchmark, not the scheduler: pods of another run still
	// terminating would count against the nodes' capacity.
	nodes, err := benchkit.KwokNodes(ctx, c)
	if err != nil {
		return ns, err
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
			NodeName:   nodes[0],
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
	sliceC := make(chan time.Time, 16)
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
	return benchkit.PodReadyTimes(ctx, c, ns, member), sliceC
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
