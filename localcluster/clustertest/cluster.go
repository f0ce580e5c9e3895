// Package clustertest gives integration tests a real local Kubernetes cluster (see
// localcluster): one shared cluster per state dir, each test in its
// own namespace.
//
//	func TestX(t *testing.T) {
//		c := cluster.Get(t)
//		ns := c.Namespace(t)
//		c.Client.AppsV1().StatefulSets(ns).Create(...)
//	}
//
// Get reuses the running cluster ("make cluster-up", or the one "make test"
// starts) and starts one if none runs; the binaries must have been built with
// "make cluster-build". The cluster is shared by every package of a "go test"
// run, so tests must not stop or restart it: use Private for that.
package clustertest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/localcluster"
)

// Cluster is a running local cluster with admin access.
type Cluster struct {
	Kubeconfig string       // admin kubeconfig path
	Config     *rest.Config // admin rest config
	Client     kubernetes.Interface
	DNSAddr    string // CoreDNS host:port, UDP and TCP
	Domain     string // cluster domain, "cluster.local"
	StateDir   string
	// Nodes are the simulated nodes the cluster was started with (node-0,
	// node-1, ...), spread round robin over zones zone-a, zone-b, ...
	Nodes []string

	// RealNodes are the real nodes (kubelet, containerd each) if the
	// cluster has them; tests that need them call NeedRealNodes.
	RealNodes []*localcluster.RealNode

	state   *localcluster.State
	private bool
}

// NeedRealNodes returns the cluster's real nodes if it has at least n;
// otherwise it ends the test with the reason (need.Unavailable: a skip, a
// failure under CI=true). Pods for them select and tolerate RealNodeLabel.
func (c *Cluster) NeedRealNodes(t testing.TB, n int) []*localcluster.RealNode {
	t.Helper()
	if len(c.RealNodes) >= n {
		need.Ran(t, "real-node")
		return c.RealNodes
	}
	why := fmt.Sprintf("needs %d real nodes, the local cluster has %d", n, len(c.RealNodes))
	if c.state.RealNodeSkipped != "" {
		why += ": " + c.state.RealNodeSkipped
	}
	need.Unavailable(t, "real-node", why)
	return nil
}

// growMu serializes GrowRealNodes within a test process.
var growMu sync.Mutex

// GrowRealNodes makes sure the cluster has at least n real nodes, adding
// them with localcluster.AddRealNode as needed (a few seconds each; they
// stay until the cluster stops), and returns the names of all of them. It
// needs what NeedRealNodes needs, and root to add: otherwise it ends the test
// the same way (a skip, a failure under CI=true); a failure to add fails the
// test. It updates c.RealNodes, so call it from a test that does not run in
// parallel with tests that read them. Test processes growing the cluster at
// the same time may add one node more than asked for.
func (c *Cluster) GrowRealNodes(t testing.TB, n int) []string {
	t.Helper()
	growMu.Lock()
	defer growMu.Unlock()
	c.NeedRealNodes(t, 1)
	for {
		s, err := localcluster.Load(c.StateDir)
		if err != nil {
			t.Fatalf("grow the real nodes: %v", err)
		}
		if len(s.RealNodes) != len(c.RealNodes) {
			c.RealNodes, c.state = s.RealNodes, s
		}
		if len(s.RealNodes) >= n {
			break
		}
		if os.Geteuid() != 0 {
			need.Unavailable(t, "real-node", fmt.Sprintf("needs %d real nodes, the local cluster has %d, and root to add more (euid != 0)", n, len(s.RealNodes)))
		}
		o, err := options("")
		if err != nil {
			t.Fatalf("grow the real nodes: %v", err)
		}
		o.StateDir = c.StateDir
		added, err := localcluster.AddRealNode(context.Background(), o)
		if err != nil {
			t.Fatalf("grow the real nodes to %d: %v", n, err)
		}
		t.Logf("added real node %s", added.Name)
	}
	names := make([]string, len(c.RealNodes))
	for i, rn := range c.RealNodes {
		names[i] = rn.Name
	}
	return names
}

// NeedRealNode is NeedRealNodes(t, 1), returning the first.
func (c *Cluster) NeedRealNode(t testing.TB) *localcluster.RealNode {
	t.Helper()
	return c.NeedRealNodes(t, 1)[0]
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Get returns the shared local cluster, starting it if needed (reusing a
// running one; shared across the packages of one "go test" run via the state
// dir and a lock). It calls t.Fatal with a clear message if it cannot.
func Get(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	shared.once.Do(func() {
		o, err := options("")
		if err != nil {
			shared.err = err
			return
		}
		// The user registration lasts as long as this test process, so a
		// cluster started just for this run (flock-cluster exec) outlives it.
		s, started, _, err := localcluster.Acquire(context.Background(), o)
		if err != nil {
			shared.err = err
			return
		}
		if started {
			fmt.Fprintf(os.Stderr, "started local cluster in %s; it keeps running (stop: make cluster-down)\n", s.StateDir)
		}
		shared.c, shared.err = newCluster(s, false)
	})
	if shared.err != nil {
		t.Fatalf("local cluster unavailable: %v", shared.err)
	}
	return shared.c
}

// skipShort skips a test that needs the local cluster under go test -short
// (make test-unit, the fast tier). make test never passes -short, so there
// every such test runs.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local cluster: skipped under -short (make test-unit)")
	}
}

// Private starts a cluster of its own for this test, in a temporary state dir,
// and stops it in t.Cleanup. It takes several seconds and a few hundred MiB; use
// it only for tests that disturb the cluster (RestartAPIServer).
func Private(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	dir, err := os.MkdirTemp("", "flock-cluster-")
	if err != nil {
		t.Fatalf("private cluster: %v", err)
	}
	o, err := options(dir)
	if err != nil {
		t.Fatalf("private cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := localcluster.Down(context.Background(), dir, o.Log); err != nil {
			t.Errorf("stop private cluster: %v", err)
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("private cluster logs kept in %s/logs", dir)
		}
	})
	s, _, err := localcluster.Up(context.Background(), o)
	if err != nil {
		t.Fatalf("start private cluster: %v", err)
	}
	c, err := newCluster(s, true)
	if err != nil {
		t.Fatalf("private cluster: %v", err)
	}
	return c
}

func options(stateDir string) (localcluster.Options, error) {
	var o localcluster.Options
	wd, err := os.Getwd()
	if err != nil {
		return o, err
	}
	root, err := localcluster.RepoRoot(wd)
	if err != nil {
		return o, err
	}
	if o.CacheRoot, err = localcluster.CacheRoot(); err != nil {
		return o, err
	}
	o.StateDir = stateDir
	if o.StateDir == "" {
		o.StateDir = localcluster.DefaultStateDir(root)
		// Only the shared cluster may have the machine's one real node.
		o.RealNodes = localcluster.RealNodesFromEnv()
		o.ImagesDir = filepath.Join(root, "bin", "images")
	}
	o.Timeout = 3 * time.Minute
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return o, nil
}

func newCluster(s *localcluster.State, private bool) (*Cluster, error) {
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return &Cluster{
		Kubeconfig: s.Kubeconfig, Config: cfg, Client: cs,
		DNSAddr: s.DNSAddr, Domain: s.Domain, StateDir: s.StateDir,
		Nodes:     s.NodeNames(),
		RealNodes: s.RealNodes,
		state:     s, private: private,
	}, nil
}

// Namespace creates a fresh namespace for the test and deletes it in
// t.Cleanup (kept when the test failed and FLOCK_KEEP_NAMESPACES is set). It
// returns once pods can be created in it.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: namespacePrefix(t.Name()),
		Labels:       map[string]string{"test.flockd.io/test": labelValue(t.Name())},
	}}
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create test namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("FLOCK_KEEP_NAMESPACES") != "" {
			t.Logf("keeping namespace %s (KUBECONFIG=%s)", ns.Name, c.Kubeconfig)
			return
		}
		err := c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete test namespace %s: %v", ns.Name, err)
		}
	})
	// The ServiceAccount admission plugin rejects pods until the namespace's
	// default ServiceAccount exists.
	c.WaitFor(t, "default ServiceAccount in "+ns.Name, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return ns.Name
}

// namespacePrefix turns a test name into "t-<name>-" fit for GenerateName.
func namespacePrefix(name string) string {
	v := labelValue(name)
	if len(v) > 40 {
		v = v[:40]
	}
	return "t-" + strings.Trim(v, "-") + "-"
}

// labelValue maps a test name to [a-z0-9-], at most 63 characters.
func labelValue(name string) string {
	b := []byte(strings.ToLower(name))
	for i, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-")
	if len(s) > 63 {
		s = strings.Trim(s[:63], "-")
	}
	return s
}

// WaitFor polls cond every 100ms until it returns true, and fails the test
// with what and the last error when timeout passes first. Use generous
// timeouts: they bound a hang, they are not performance assertions.
func (c *Cluster) WaitFor(t testing.TB, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	await.Poll{Timeout: timeout, Every: 100 * time.Millisecond}.Check(t, func() error {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if last == nil {
			return errors.New("not yet, no error")
		}
		return fmt.Errorf("last error: %w", last)
	}, "%s", what)
}

// Pod annotations that steer the simulated pod lifecycle (localcluster).
const (
	AnnotationReady          = "test.flockd.io/ready"           // "false": readiness probe fails
	AnnotationReadyDelay     = "test.flockd.io/ready-delay"     // duration before Ready
	AnnotationFail           = "test.flockd.io/fail"            // "true": containers exit 1
	AnnotationCompleteAfter  = "test.flockd.io/complete-after"  // duration, then Succeeded
	AnnotationTerminateAfter = "test.flockd.io/terminate-after" // duration a deleted pod keeps terminating
)

// SetPodReady makes a running pod's readiness probe pass or fail. The change
// is asynchronous; wait for the pod's Ready condition if the test needs it.
func (c *Cluster) SetPodReady(t testing.TB, ns, pod string, ready bool) {
	t.Helper()
	c.annotatePod(t, ns, pod, AnnotationReady, fmt.Sprint(ready))
}

// FailPod makes a pod's containers fail (phase Failed). Controllers react as
// on a real cluster: a StatefulSet recreates the pod, a Job counts a failure.
func (c *Cluster) FailPod(t testing.TB, ns, pod string) {
	t.Helper()
	c.annotatePod(t, ns, pod, AnnotationFail, "true")
}

func (c *Cluster) annotatePod(t testing.TB, ns, pod, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), pod, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate pod %s/%s %s=%s: %v", ns, pod, key, value, err)
	}
}

// RestartAPIServer stops kube-apiserver and starts it again, returning when it
// is ready. Only for clusters from Private: the shared cluster serves other
// packages running in parallel.
func (c *Cluster) RestartAPIServer(t testing.TB) {
	t.Helper()
	if !c.private {
		t.Fatal("RestartAPIServer needs a cluster from cluster.Private(t); the shared one serves other tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.state.Restart(ctx, "kube-apiserver"); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
}

// UpstreamPeerFinder is the path of Kubernetes' own peer-finder
// (test/images/pets/peer-finder), built with the cluster, for comparisons.
func UpstreamPeerFinder(t testing.TB) string {
	t.Helper()
	root, err := localcluster.CacheRoot()
	if err != nil {
		t.Fatalf("upstream peer-finder: %v", err)
	}
	p := localcluster.UpstreamPeerFinder(root)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("upstream peer-finder not built (run \"make cluster-build\"): %v", err)
	}
	return p
}

// randSuffix is a short random name suffix.
func randSuffix() string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}

// PodReady reports whether p's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
