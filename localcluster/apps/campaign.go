package apps

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/localcluster"
)

// Subjects of the campaign: flock's peer-finder as the application's
// example runs it, and Kubernetes' upstream peer-finder in the same
// manifest (see shape).
const (
	Flock    = "flock"
	Upstream = "upstream"
)

// UpstreamImage holds upstream's peer-finder at /peer-finder (make images).
const UpstreamImage = "ghcr.io/flockd/apps/upstream-peer-finder:dev"

// Plan is one round's schedule, the same for every subject and every
// application: members are named by ordinal.
type Plan struct {
	Round    int
	Replicas int
	// Policy is the StatefulSet's podManagementPolicy.
	Policy string
	// Skew delays each pod's start (an init container sleeps), by ordinal.
	Skew map[int]time.Duration
	// KillAt > 0 deletes member Kill's pod that long after the StatefulSet
	// was created (mid-bootstrap).
	KillAt time.Duration
	Kill   int
	// ScaleAt > 0 scales to ScaleTo that long after creation.
	ScaleAt time.Duration
	ScaleTo int
	// Wipe deletes member 0's pod and its claim (its data) WipeAfter once
	// the cluster was first healthy, and waits until it is healthy again.
	Wipe      bool
	WipeAfter time.Duration
	// Node, when set, stops or kills the real node that hosts a member
	// and starts it again (see NodeFault); nil: no node fault.
	Node *NodeFault
}

// NodeFault takes down the real node hosting member Member At after the
// StatefulSet was created, for Down, then starts it again: the cluster
// must be healthy after the node is back.
type NodeFault struct {
	Member   int
	Fault    localcluster.NodeFault // NodeStop or NodeKill
	At, Down time.Duration
}

// DrawNodeFault draws round's node fault from seed with probability p (0
// to 1): a member of the cold start's, stopped or killed with even odds,
// 0-30 s after the start (mid-bootstrap or after), down for 15-60 s; nil
// when the draw says none. The same seed and round give the same fault,
// and it is drawn from its own stream, so NewPlan's plans stay the same
// with node faults on or off. It is pure.
func DrawNodeFault(seed uint64, round, replicas int, p float64) *NodeFault {
	r := rand.New(rand.NewPCG(seed^0x6e6f6465, uint64(round)))
	if r.Float64() >= p {
		return nil
	}
	f := &NodeFault{Member: r.IntN(replicas), Fault: localcluster.NodeStop}
	if r.IntN(2) == 0 {
		f.Fault = localcluster.NodeKill
	}
	f.At = time.Duration(r.IntN(30000)) * time.Millisecond
	f.Down = time.Duration(15000+r.IntN(45000)) * time.Millisecond
	return f
}

// NewPlan draws round's schedule from seed: the same seed and round give
// the same plan.
func NewPlan(seed uint64, round, replicas int) Plan {
	r := rand.New(rand.NewPCG(seed, uint64(round)))
	p := Plan{Round: round, Replicas: replicas, Policy: "Parallel", Skew: map[int]time.Duration{}}
	if r.IntN(2) == 0 {
		p.Policy = "OrderedReady"
	}
	for i := range replicas + 2 {
		p.Skew[i] = time.Duration(r.IntN(5000)) * time.Millisecond
	}
	if r.IntN(2) == 0 {
		p.KillAt = time.Duration(2000+r.IntN(18000)) * time.Millisecond
		p.Kill = r.IntN(replicas)
	}
	if r.IntN(2) == 0 {
		p.ScaleAt = time.Duration(1000+r.IntN(14000)) * time.Millisecond
		p.ScaleTo = replicas + 2
	}
	if r.IntN(2) == 0 {
		p.Wipe = true
		p.WipeAfter = time.Duration(r.IntN(5000)) * time.Millisecond
	}
	return p
}

// Peak is the most members the round runs at once: its replicas, or the
// size it scales up to.
func (p Plan) Peak() int {
	if p.ScaleAt > 0 {
		return max(p.Replicas, p.ScaleTo)
	}
	return p.Replicas
}

// String is the plan in words, for logs.
func (p Plan) String() string {
	s := fmt.Sprintf("round %d: %d members, %s", p.Round, p.Replicas, p.Policy)
	if p.KillAt > 0 {
		s += fmt.Sprintf(", kill member %d at %s", p.Kill, p.KillAt)
	}
	if p.ScaleAt > 0 {
		s += fmt.Sprintf(", scale to %d at %s", p.ScaleTo, p.ScaleAt)
	}
	if p.Wipe {
		s += fmt.Sprintf(", wipe member 0 %s after healthy", p.WipeAfter)
	}
	if f := p.Node; f != nil {
		s += fmt.Sprintf(", %s member %d's node at %s for %s", f.Fault, f.Member, f.At, f.Down)
	}
	return s
}

// Outcome of a round for one subject.
type Outcome struct {
	Subject string
	Plan    Plan
	NS      string
	// Split: more than one cluster identity was seen over the round (see
	// Observation), or the members showed two clusters at once.
	Split bool
	// Stuck: no healthy cluster (and no split), and either nothing got
	// better for Campaign.Stall or Campaign.Deadline passed.
	Stuck bool
	// Aborted: the round could not be run or finished (the cluster's API
	// failed, or the campaign was stopped): neither a split nor stuck, and
	// not counted.
	Aborted bool
	// Healthy is the time from the StatefulSet's creation to the first
	// healthy cluster after the faults of the bootstrap (the node fault
	// included: its node back); Rejoin the time from the wipe to healthy
	// again, the mark on every member.
	Healthy, Rejoin time.Duration
	Detail          string
}

// DefaultStall and DefaultDeadline are Campaign's Stall and Deadline as the
// campaign and its smoke test use them. A slow OrderedReady step of run 14
// (about 40 s per member at 82 % CPU pressure) progresses several times a
// minute; its rounds took at most 243 s.
const (
	DefaultStall    = 2 * time.Minute
	DefaultDeadline = 10 * time.Minute
)

// StallFor is the Stall for rounds of the application app: DefaultStall,
// and twice that for Galera, whose state transfer to a joining member moves
// none of the signals its progress reads (the donor Desynced, the joiner
// silent) for minutes on a loaded machine: galera-4's rounds 37-39, and
// TestCampaignSmoke's two Galera rounds in a clean clone's CI on
// 2026-12-05, each stuck 2 minutes into an rsync transfer that was still
// running.
func StallFor(app string) time.Duration {
	if app == "galera" {
		return 2 * DefaultStall
	}
	return DefaultStall
}

// Campaign runs rounds against a cluster.
type Campaign struct {
	Config *rest.Config
	Client kubernetes.Interface
	// App judges the application; Manifests are its example's resources
	// (examples/apps/<name>), in order, with one StatefulSet.
	App       App
	Manifests [][]byte
	// FaultNode applies a plan's node fault to the real node name; nil:
	// plans must have none (Run aborts a round that does).
	FaultNode func(ctx context.Context, node string, fault localcluster.NodeFault) error
	// Edit is applied to every object before it is created (e.g. to land
	// pods on a node).
	Edit func(ns string, o *unstructured.Unstructured)
	// A phase of a round (formation, rejoin after the wipe) is stuck when
	// the App's Progress did not rise for Stall, or when Deadline passed since
	// it began, even while it rises (a livelock). Stall, not Deadline, is
	// the rule that finds a deadlocked bootstrap; unlike a deadline it does
	// not grow with how busy the machine is: a slow OrderedReady step
	// still progresses (a pod gets its address, etcd answers, a member
	// starts), a deadlock does not. Each new pod start counts as progress
	// too (see PodStarts), and the time a pod of the round is bound to a
	// node that a round's fault holds down (faults of several rounds can
	// keep one node down for minutes) does not count. Zero Stall:
	// Deadline alone.
	Stall, Deadline time.Duration
	// LogDir, when set, receives the containers' logs of failed rounds.
	LogDir string
	// Keep leaves the namespaces of failed rounds.
	Keep bool

	http http.Client

	// faultPoll is how often a node fault asks for its member's node
	// (zero: each second).
	faultPoll time.Duration
	// down are the nodes the rounds' node faults hold down now.
	downMu sync.Mutex
	down   map[string]bool
}

// Manifests reads the resources of a kustomization directory, in order.
func Manifests(dir string) ([][]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var out [][]byte
	for _, r := range k.Resources {
		m, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Run runs plan for subject in a new namespace and deletes it after.
func (c *Campaign) Run(ctx context.Context, subject string, plan Plan) Outcome {
	out := Outcome{Subject: subject, Plan: plan}
	var ns *corev1.Namespace
	// The campaign restarts the API server: setting up retries for a minute.
	err := retry(ctx, func() (err error) {
		ns, err = c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			GenerateName: fmt.Sprintf("campaign-%s-%d-", subject, plan.Round), Labels: map[string]string{"flockd.io/campaign": subject},
		}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		out.Aborted, out.Detail = true, fmt.Sprintf("create namespace: %v", err)
		return out
	}
	out.NS = ns.Name
	failed := true
	defer func() {
		if failed && c.LogDir != "" {
			c.saveLogs(out)
		}
		if !failed || !c.Keep {
			// Retried like the setup: a namespace left by an API server
			// restart keeps its etcd cluster running beside later rounds
			// (run 8's round 107 did, for the rest of the run).
			_ = retry(context.Background(), func() error {
				err := c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			})
		}
	}()
	set, err := c.create(ctx, ns.Name, subject, plan)
	if err != nil {
		out.Aborted, out.Detail = true, err.Error()
		return out
	}
	c.round(ctx, &out, set)
	if ctx.Err() != nil && !out.Split {
		out.Stuck, out.Aborted = false, true
	}
	failed = out.Split || out.Stuck
	return out
}

func (c *Campaign) round(ctx context.Context, out *Outcome, set string) {
	plan, ns := out.Plan, out.NS
	member := func(i int) string { return fmt.Sprintf("%s-%d", set, i) }
	t0 := time.Now()
	faults := make(chan error, 3)
	pending := 0
	// The faults end with the round: none acts on a round already judged.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if plan.KillAt > 0 {
		pending++
		go func() {
			time.Sleep(plan.KillAt)
			faults <- retry(fctx, func() error {
				return c.Client.CoreV1().Pods(ns).Delete(fctx, member(plan.Kill), metav1.DeleteOptions{})
			})
		}()
	}
	if plan.ScaleAt > 0 {
		pending++
		go func() {
			time.Sleep(plan.ScaleAt)
			faults <- retry(fctx, func() error { return c.scale(fctx, ns, set, plan.ScaleTo) })
		}()
	}
	if plan.Node != nil {
		pending++
		go func() {
			// Waiting for the node ends with the round; the fault, once
			// begun, is carried through (its node started again).
			pod := member(plan.Node.Member)
			node, err := c.nodeOf(fctx, ns, pod, plan.Node.At)
			if err == nil {
				err = c.nodeFault(ctx, node, pod, *plan.Node)
			}
			faults <- err
		}()
	}
	want := plan.Replicas
	if plan.ScaleAt > 0 {
		want = plan.ScaleTo
	}
	pods := make([]string, want)
	for i := range pods {
		pods[i] = member(i)
	}
	read := Reader{Exec: NewExec(c.Config, c.Client), HTTP: &c.http}
	seen := map[string]bool{}
	// started are the round's pod starts seen (PodStarts): part of the
	// progress, so that a member busy before its application answers (a
	// first start initializing its data) is not taken for a stall.
	started := map[string]bool{}
	// judge records every cluster identity seen in the round: more than
	// one is a split brain, whichever reader saw it; so is an observation
	// that shows two clusters at once.
	judge := func(o Observation) Observation {
		for _, id := range o.Identities {
			seen[id] = true
		}
		switch {
		case out.Split:
		case o.Split != "":
			out.Split, out.Detail = true, "split brain: "+o.Split+"; "+o.Detail
		case len(seen) > 1:
			out.Split = true
			out.Detail = fmt.Sprintf("split brain: %q; %s", slices.Sorted(maps.Keys(seen)), o.Detail)
		}
		return o
	}
	// settle polls until the want pods form one healthy cluster (with the
	// mark on every member, once marked), after every pending fault
	// happened; false on a split, or when stuck (see Stall).
	mark := ""
	settle := func(begin time.Time) bool {
		deadline := begin.Add(c.Deadline)
		clock := stallClock{last: -1, rise: begin}
		for {
			for pending > 0 {
				select {
				case err := <-faults:
					pending--
					if err != nil && !apierrors.IsNotFound(err) {
						// The schedule was not applied: the round says
						// nothing about the subject.
						out.Aborted, out.Detail = true, fmt.Sprintf("fault not applied: %v", err)
						return false
					}
					continue
				default:
				}
				break
			}
			// Poll cheaply; a healthy poll is confirmed as the
			// application tests judge.
			var list []corev1.Pod
			read.IPs, list = c.podIPs(ctx, ns)
			read.Containers = ContainerIDs(list)
			PodStarts(list, started)
			o := judge(c.App.Observe(ctx, read, ns, pods, false, mark))
			if c.onDownNode(list) {
				// A member on a down node cannot move, whatever the
				// subject does; the deadline still runs.
				clock.hold(time.Now())
			}
			clock.observe(o.Progress+len(started), time.Now())
			if o.Healthy && pending == 0 {
				o = judge(c.App.Observe(ctx, read, ns, pods, true, mark))
			}
			if out.Split {
				return false
			}
			if o.Healthy && pending == 0 {
				return true
			}
			now := time.Now()
			stalled := clock.stalled(now, c.Stall)
			if stalled || now.After(deadline) || ctx.Err() != nil {
				out.Stuck = true
				out.Detail = o.Detail
				switch {
				case stalled:
					out.Detail = fmt.Sprintf("no progress for %s (at %s): %s", c.Stall, now.Sub(begin).Round(time.Second), o.Detail)
				case now.After(deadline):
					out.Detail = fmt.Sprintf("deadline %s passed: %s", c.Deadline, o.Detail)
				}
				return false
			}
			time.Sleep(time.Second)
		}
	}
	if !settle(t0) {
		return
	}
	out.Healthy = time.Since(t0)
	healthy := func() bool {
		read.IPs, _ = c.podIPs(ctx, ns)
		return judge(c.App.Observe(ctx, read, ns, pods, true, "")).Healthy
	}
	m, settled, err := takeMark(func() (string, error) { return c.mark(ctx, read, ns, pods) }, healthy,
		func() bool { return settle(time.Now()) }, time.Now().Add(c.Deadline))
	switch {
	case !settled:
		out.Detail = "before the mark: " + out.Detail
		return
	case err != nil:
		out.Stuck, out.Detail = true, "healthy, but "+err.Error()
		return
	}
	mark = m
	if mark != "" && !settle(time.Now()) {
		out.Detail = "after the mark: " + out.Detail
		return
	}
	if !plan.Wipe {
		return
	}
	time.Sleep(plan.WipeAfter)
	t1 := time.Now()
	if err := c.wipe(ctx, ns, member(0), "data-"+member(0)); err != nil {
		out.Aborted, out.Detail = true, err.Error()
		return
	}
	if !settle(t1) {
		out.Detail = "after the wipe of " + member(0) + ": " + out.Detail
		return
	}
	out.Rejoin = time.Since(t1)
}

// takeMark has mark take the mark. A mark refused (mark tries for Stall)
// while the cluster is healthy is a stuck cluster: its error is returned.
// Refused by a cluster no longer healthy (another round's node fault or an
// outage took it down right after it was healthy: redis-11's round 14),
// the cluster must first become healthy again by the stall rule (settle;
// false: the round ended as settle judged it, settled false) and then take
// the mark, until deadline. It has no effects of its own: they are its
// callers'.
func takeMark(mark func() (string, error), healthy, settle func() bool, deadline time.Time) (m string, settled bool, err error) {
	for {
		m, err := mark()
		if err == nil {
			return m, true, nil
		}
		if healthy() || time.Now().After(deadline) {
			return "", true, err
		}
		if !settle() {
			return "", false, nil
		}
	}
}

// mark has the App mark the healthy cluster, trying again for up to Stall
// (a minute when Stall is zero): a write a healthy cluster refuses that long
// is a stuck cluster.
func (c *Campaign) mark(ctx context.Context, read Reader, ns string, pods []string) (string, error) {
	deadline := time.Now().Add(cmp.Or(c.Stall, time.Minute))
	for {
		read.IPs, _ = c.podIPs(ctx, ns)
		mark, err := c.App.Mark(ctx, read, ns, pods)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return mark, err
		}
		time.Sleep(2 * time.Second)
	}
}

// nodeOf waits at, then returns the node that hosts pod (or, when it has
// none yet, the node it lands on: an OrderedReady set creates its later
// members minutes after the start). Errors while asking (the API server
// restarting) are asked again until ctx, the round, ends.
func (c *Campaign) nodeOf(ctx context.Context, ns, pod string, at time.Duration) (string, error) {
	time.Sleep(at)
	every := c.faultPoll
	if every == 0 {
		every = time.Second
	}
	for {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err == nil {
			if p.Spec.NodeName != "" {
				return p.Spec.NodeName, nil
			}
			err = errors.New("not scheduled")
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s has no node to fault: %w (last answer: %w)", pod, ctx.Err(), err)
		case <-time.After(every):
		}
	}
}

// nodeFault takes down node (pod's), and starts it again f.Down later.
func (c *Campaign) nodeFault(ctx context.Context, node, pod string, f NodeFault) error {
	if c.FaultNode == nil {
		return fmt.Errorf("the plan has a node fault and the campaign none")
	}
	if err := c.FaultNode(ctx, node, f.Fault); err != nil {
		return fmt.Errorf("%s node %s (%s's): %w", f.Fault, node, pod, err)
	}
	c.setDown(node, true)
	time.Sleep(f.Down)
	// Started with a context of its own: a node left down would take the
	// other rounds' members with it.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.FaultNode(sctx, node, localcluster.NodeStart); err != nil {
		return fmt.Errorf("start node %s: %w", node, err)
	}
	c.setDown(node, false)
	return nil
}

// setDown records node as held down by a fault, or started again.
func (c *Campaign) setDown(node string, down bool) {
	c.downMu.Lock()
	defer c.downMu.Unlock()
	if !down {
		delete(c.down, node)
		return
	}
	if c.down == nil {
		c.down = map[string]bool{}
	}
	c.down[node] = true
}

// onDownNode reports whether one of pods is bound to a node a fault holds
// down now (a pod there, being deleted or not, changes only once it is
// back).
func (c *Campaign) onDownNode(pods []corev1.Pod) bool {
	c.downMu.Lock()
	defer c.downMu.Unlock()
	return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return c.down[p.Spec.NodeName] })
}

// stallClock remembers when a progress score last rose above the poll
// before it. A drop and a rise again (a member killed and back, the API
// server restarted) counts as progress, so only a bootstrap that stays
// flat stalls; one that flaps is caught by the deadline instead.
type stallClock struct {
	last int
	rise time.Time
}

func (c *stallClock) observe(score int, now time.Time) {
	if score > c.last {
		c.rise = now
	}
	c.last = score
}

// hold restarts the stall time at now, as a rise does.
func (c *stallClock) hold(now time.Time) { c.rise = now }

// stalled reports whether the score has not risen for longer than stall;
// never for a zero stall.
func (c *stallClock) stalled(now time.Time, stall time.Duration) bool {
	return stall > 0 && now.Sub(c.rise) > stall
}

// podIPs are the addresses of ns's running pods, by name, and the pods;
// none when the pods cannot be listed.
func (c *Campaign) podIPs(ctx context.Context, ns string) (map[string]string, []corev1.Pod) {
	ips := map[string]string{}
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ips, nil
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			ips[p.Name] = p.Status.PodIP
		}
	}
	return ips, list.Items
}

// PodStarts adds to seen each step of the pods' starts not seen before,
// keyed by pod UID: the pod got its address, its init containers finished,
// and each container started (once per pod, however often it restarts, so
// a crash loop is not progress). Each init container that finished with
// success counts once per container id: they run again only in a new pod
// sandbox, a pod coming back after its node was killed (which can take
// longer than the stall time on a loaded machine), never in a crash loop.
func PodStarts(pods []corev1.Pod, seen map[string]bool) {
	for _, p := range pods {
		uid := string(p.UID)
		if p.DeletionTimestamp != nil || uid == "" {
			continue
		}
		if p.Status.PodIP != "" {
			seen[uid+"/address"] = true
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodInitialized && c.Status == corev1.ConditionTrue {
				seen[uid+"/initialized"] = true
			}
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.State.Running != nil || st.RestartCount > 0 {
				seen[uid+"/"+st.Name] = true
			}
		}
		for _, st := range p.Status.InitContainerStatuses {
			if t := st.State.Terminated; t != nil && t.ExitCode == 0 && st.ContainerID != "" {
				seen[uid+"/"+st.Name+"/"+st.ContainerID] = true
			}
		}
	}
}

// wipe deletes a pod's claim and the pod, so it comes back with an empty
// volume, and waits until the StatefulSet re-created the pod.
func (c *Campaign) wipe(ctx context.Context, ns, pod, claim string) error {
	// Each call is retried through the campaign's API server restarts; a
	// delete retried after it was done finds nothing to delete.
	var old *corev1.Pod
	if err := retry(ctx, func() (err error) {
		old, err = c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("wipe: %w", err)
	}
	if err := retry(ctx, func() error {
		return c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claim, metav1.DeleteOptions{})
	}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("wipe: %w", err)
	}
	if err := retry(ctx, func() error {
		return c.Client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}})
	}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("wipe: %w", err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err == nil && p.UID != old.UID {
			return nil
		}
	}
	return fmt.Errorf("wipe: %s not re-created within a minute", pod)
}

func (c *Campaign) scale(ctx context.Context, ns, set string, n int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	_, err := c.Client.AppsV1().StatefulSets(ns).Patch(ctx, set, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// create applies the manifests for subject with the plan's policy and
// skew, and returns the StatefulSet's name.
func (c *Campaign) create(ctx context.Context, ns, subject string, plan Plan) (string, error) {
	var objs []*unstructured.Unstructured
	set := ""
	for _, m := range c.Manifests {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(m), 4096)
		for {
			var o unstructured.Unstructured
			if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return "", fmt.Errorf("decode manifest: %w", err)
			}
			if len(o.Object) > 0 {
				objs = append(objs, &o)
			}
			if o.GetKind() == "StatefulSet" && set == "" {
				set = o.GetName()
			} else if o.GetKind() == "StatefulSet" {
				return "", fmt.Errorf("the manifests have two StatefulSets, %s and %s", set, o.GetName())
			}
		}
	}
	if set == "" {
		return "", fmt.Errorf("the manifests have no StatefulSet")
	}
	skew := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "campaign-skew"}, "data": map[string]any{},
	}}
	for i, d := range plan.Skew {
		_ = unstructured.SetNestedField(skew.Object, fmt.Sprintf("%.3f", d.Seconds()), "data", fmt.Sprintf("%s-%d", set, i))
	}
	objs = append([]*unstructured.Unstructured{skew}, objs...)
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return "", err
	}
	var groups []*restmapper.APIGroupResources
	if err := retry(ctx, func() (err error) {
		groups, err = restmapper.GetAPIGroupResources(c.Client.Discovery())
		return err
	}); err != nil {
		return "", err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, o := range objs {
		if o.GetKind() == "StatefulSet" {
			if err := shape(o, subject, plan); err != nil {
				return "", err
			}
		}
		if c.Edit != nil {
			c.Edit(ns, o)
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if err != nil {
			return "", err
		}
		o.SetNamespace(ns)
		if err := retry(ctx, func() error {
			_, err := dc.Resource(m.Resource).Namespace(ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		}); err != nil {
			return "", fmt.Errorf("create %s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	return set, nil
}

// shape sets the plan's pod management policy and start skew on the
// StatefulSet and, for upstream, puts upstream's peer-finder in place of
// flock's with upstream's flags: the same scripts, no bootstrap role.
func shape(o *unstructured.Unstructured, subject string, plan Plan) error {
	_ = unstructured.SetNestedField(o.Object, plan.Policy, "spec", "podManagementPolicy")
	_ = unstructured.SetNestedField(o.Object, int64(plan.Replicas), "spec", "replicas")
	service, _, _ := unstructured.NestedString(o.Object, "spec", "serviceName")
	spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	inits, _, _ := unstructured.NestedSlice(spec, "initContainers")
	conts, _, _ := unstructured.NestedSlice(spec, "containers")
	for _, list := range [][]any{inits, conts} {
		for _, x := range list {
			ct := x.(map[string]any)
			switch name := ct["name"]; {
			case subject == Upstream && name == "install":
				ct["image"] = UpstreamImage
			case subject == Upstream && name == "bootstrap":
				ct["command"] = []any{"/flock/peer-finder", "-on-start=/scripts/on-start.sh", "-service=" + service}
			case subject == Upstream && name == "peer-finder":
				ct["command"] = []any{"/flock/peer-finder", "-on-change=/scripts/on-change.sh", "-service=" + service}
			}
		}
	}
	if len(inits) == 0 {
		return fmt.Errorf("the StatefulSet has no init containers")
	}
	if subject == Upstream && slices.IndexFunc(inits, func(x any) bool { return x.(map[string]any)["name"] == "install" }) < 0 {
		return fmt.Errorf("upstream: the StatefulSet has no install init container to copy upstream's peer-finder")
	}
	img := inits[len(inits)-1].(map[string]any)["image"]
	skew := map[string]any{
		"name": "skew", "image": img,
		"command":      []any{"/bin/sh", "-c", `sleep "$(cat /skew/$(hostname) 2>/dev/null || echo 0)"`},
		"volumeMounts": []any{map[string]any{"name": "campaign-skew", "mountPath": "/skew"}},
	}
	spec["initContainers"] = append([]any{skew}, inits...)
	spec["containers"] = conts
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	spec["volumes"] = append(vols, map[string]any{"name": "campaign-skew", "configMap": map[string]any{"name": "campaign-skew"}})
	return unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec")
}

// saveLogs writes every container's log of the round's pods to LogDir,
// with the objects' status and events (Describe).
func (c *Campaign) saveLogs(out Outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(c.LogDir, out.NS)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	var sum strings.Builder
	fmt.Fprintf(&sum, "%s\nsubject %s split %v stuck %v\n%s\n", out.Plan, out.Subject, out.Split, out.Stuck, out.Detail)
	_ = os.WriteFile(filepath.Join(dir, "outcome.txt"), []byte(sum.String()), 0o644)
	pods, err := c.Client.CoreV1().Pods(out.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	var sets []appsv1.StatefulSet
	if l, err := c.Client.AppsV1().StatefulSets(out.NS).List(ctx, metav1.ListOptions{}); err == nil {
		sets = l.Items
	}
	var events []corev1.Event
	if l, err := c.Client.CoreV1().Events(out.NS).List(ctx, metav1.ListOptions{}); err == nil {
		events = l.Items
	}
	_ = os.WriteFile(filepath.Join(dir, "describe.txt"), []byte(Describe(sets, pods.Items, events, time.Now())), 0o644)
	for _, p := range pods.Items {
		for _, ct := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			for _, prev := range []bool{false, true} {
				raw, err := c.Client.CoreV1().Pods(out.NS).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, Previous: prev}).DoRaw(ctx)
				if err != nil || len(raw) == 0 {
					continue
				}
				name := p.Name + "." + ct.Name
				if prev {
					name += ".previous"
				}
				_ = os.WriteFile(filepath.Join(dir, name+".log"), raw, 0o644)
			}
		}
	}
}

// ForRealNode lands an object's pods on the local cluster's real nodes
// (their label and taint), spread over them (the scheduler prefers the node
// with the fewest members, counting the nodes the pods tolerate: a node
// taken down by a node fault is tainted and so not counted), and points
// RoleBinding subjects at ns: the only changes the campaign makes to the
// example. The spread is a preference, not a rule: a member whose claim
// pins it to a node must go back there however many members that node
// holds (under a hard spread galera-14's round 29 waited for one forever).
func ForRealNode(ns string, o *unstructured.Unstructured) {
	switch o.GetKind() {
	case "RoleBinding":
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			s.(map[string]any)["namespace"] = ns
		}
		_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
	case "StatefulSet":
		spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		spec["nodeSelector"] = map[string]any{localcluster.RealNodeLabel: "true"}
		tol, _, _ := unstructured.NestedSlice(spec, "tolerations")
		spec["tolerations"] = append(tol, map[string]any{"key": localcluster.RealNodeLabel, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
		labels, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "metadata", "labels")
		spec["topologySpreadConstraints"] = []any{map[string]any{
			"maxSkew": int64(1), "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
			"nodeTaintsPolicy": "Honor", "labelSelector": map[string]any{"matchLabels": labels},
		}}
		_ = unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec")
	}
}

// retry runs f until it succeeds, fails with an API status (a real
// answer), or a minute passed: connection errors while the API server
// restarts are retried each second.
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}
