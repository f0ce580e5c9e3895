package realnode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/localcluster/apps"
	"github.com/flockd/flock/localcluster/clustertest"
)

// zkMarker is the znode whose data names one ensemble: written once it
// formed, read on every member after each step. A second ensemble lacks it.
const zkMarker = "/flock-ensemble"

// waitZookeeper waits until the n pods of the StatefulSet set form one
// ensemble, by srvr and conf in each pod's container (and, with marker set,
// the marker znode on each member equal to marker): one leader, n-1
// followers, one configuration whose participants are the pods. It fails at
// once on a split brain.
func (b *bed) waitZookeeper(set, container string, n int, marker string, timeout time.Duration) {
	b.t.Helper()
	ex := apps.NewExec(b.Config, b.Client)
	pods := b.podNames(set, n)
	path := ""
	if marker != "" {
		path = zkMarker
	}
	b.waitApp(fmt.Sprintf("a %d-member ZooKeeper ensemble", n), timeout, 3*time.Second, func() { b.dumpZookeeper(set, n+2) }, func() error {
		v := apps.JudgeZookeeper(apps.ReadZookeeperAll(context.Background(), ex, b.ns, pods, container, ""), pods, false)
		if v.Healthy && path != "" {
			// The markers, only once the ensemble looks whole (a JVM each).
			v = apps.JudgeZookeeper(apps.ReadZookeeperAll(context.Background(), ex, b.ns, pods, container, path), pods, true)
			if v.Healthy && (len(v.Markers) != 1 || v.Markers[0] != marker) {
				b.t.Fatalf("ensemble marker %q, want %q: another ensemble", v.Markers, marker)
			}
		}
		if len(v.Markers) > 1 {
			b.t.Fatalf("split brain: %s", v.Detail)
		}
		if !v.Healthy {
			return errors.New(v.Detail)
		}
		return nil
	})
}

// dumpZookeeper logs the containers' logs of the first n pods of set, but
// ZooKeeper's own INFO lines.
func (b *bed) dumpZookeeper(set string, n int) {
	for _, p := range b.podNames(set, n) {
		pod, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), p, metav1.GetOptions{})
		if err != nil {
			continue
		}
		var names []string
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			names = append(names, c.Name)
		}
		for _, c := range names {
			for _, prev := range []bool{true, false} {
				raw, err := b.Client.CoreV1().Pods(b.ns).GetLogs(p, &corev1.PodLogOptions{Container: c, Previous: prev}).DoRaw(context.Background())
				if err == nil {
					b.t.Logf("--- %s/%s (previous %v):\n%s", p, c, prev, zkBrief(string(raw)))
				}
			}
		}
	}
}

// zkBrief keeps a log's lines from the scripts and peer-finder, ZooKeeper's
// errors, and the last 15 lines: not ZooKeeper's INFO and WARN with their
// stack traces.
func zkBrief(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var out []string
	for i, l := range lines {
		script := len(l) > 9 && l[2] == ':' && l[5] == ':' && l[8] == ' '
		if script || strings.HasPrefix(l, "time=") || strings.HasPrefix(l, "on-start") || strings.Contains(l, " ERROR ") ||
			strings.HasPrefix(l, "20") || i >= len(lines)-15 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// logZookeeperRSS logs each pod's ZooKeeper JVM's resident memory (pid 1
// of the zk container): what a member costs with the example's heap.
func (b *bed) logZookeeperRSS(pods []string) {
	for _, p := range pods {
		out, err := b.exec(p, apps.ZookeeperContainer, "sh", "-c", "grep VmRSS /proc/1/status")
		b.t.Logf("%s: ZooKeeper %s %v", p, strings.Join(strings.Fields(out), " "), err)
	}
}

// markZookeeper writes the marker znode through pod and returns its data.
func (b *bed) markZookeeper(pod, container string) string {
	b.t.Helper()
	marker := fmt.Sprintf("%sensemble-%d", apps.MarkerPrefix, time.Now().UnixNano())
	out, err := b.exec(pod, container, "sh", "-c", `timeout 60 zkCli.sh -server 127.0.0.1:2181 create "$1" "$2"`, "sh", zkMarker, marker)
	if err != nil || !strings.Contains(out, "Created "+zkMarker) {
		b.t.Fatalf("create %s through %s: %v\n%s", zkMarker, pod, err, out)
	}
	return marker
}

// TestAppZookeeper applies examples/apps/zookeeper as written and checks,
// with srvr, conf and zkCli.sh in each pod: three members form one ensemble
// (one leader, two followers, one configuration of the three pods); scaled
// to 5 and back to 3 by dynamic reconfiguration it stays that ensemble
// (the marker written at the start is on every member) with the pods as
// its participants; a deleted member comes back into it; zk-0 with its
// claim deleted (its data lost) is removed and added anew instead of
// forming a new ensemble.
func TestAppZookeeper(t *testing.T) {
	t.Parallel() // its own namespace; a few minutes (JVMs on 2 cores)
	b := newBed(t)
	b.applyKustomization("examples/apps/zookeeper")
	start := time.Now()
	step := func(what string) { t.Logf("%s: done at %s", what, time.Since(start).Round(time.Second)) }
	b.waitZookeeper("zk", apps.ZookeeperContainer, 3, "", 6*time.Minute)
	b.waitDeliveredEvent("zk-0")
	marker := b.markZookeeper("zk-0", apps.ZookeeperContainer)
	b.waitZookeeper("zk", apps.ZookeeperContainer, 3, marker, time.Minute)
	step("3 members formed one ensemble")

	b.scale("zk", 5)
	b.waitZookeeper("zk", apps.ZookeeperContainer, 5, marker, 6*time.Minute)
	step("scaled to 5")
	b.logZookeeperRSS(b.podNames("zk", 5))
	b.scale("zk", 3)
	b.waitPods("app=zk", 3)
	b.waitZookeeper("zk", apps.ZookeeperContainer, 3, marker, 4*time.Minute)
	step("scaled back to 3")

	b.deletePod("zk-1", "")
	b.waitZookeeper("zk", apps.ZookeeperContainer, 3, marker, 4*time.Minute)
	step("zk-1 re-created")
	if log := b.logs("zk-1", "zk", false); !strings.Contains(log, "starting from the data on the volume") {
		t.Errorf("zk-1 did not restart from its data:\n%s", zkBrief(log))
	}

	b.deletePod("zk-0", "data-zk-0")
	b.waitZookeeper("zk", apps.ZookeeperContainer, 3, marker, 5*time.Minute)
	step("zk-0 re-created without its data")
	if log := b.logs("zk-0", "zk", false); !strings.Contains(log, "removing it") || !strings.Contains(log, "joining the ensemble") {
		t.Errorf("zk-0 did not rejoin by remove and add:\n%s", zkBrief(log))
	}

	b.e2eRestartZookeeper("zk", apps.ZookeeperContainer, "app=zk", marker, 6*time.Minute)
	step("Kubernetes' e2e restart (scaled to 0 and back to 3)")
}

// e2eRestartZookeeper is Kubernetes' e2e sequence on a formed 3-member
// ensemble: a znode written through member 0, the StatefulSet scaled to 0
// and back to 3, the znode read on member 2. The same ensemble must come
// back (waitZookeeper: marker, written when it formed, on every member).
func (b *bed) e2eRestartZookeeper(set, container, selector, marker string, timeout time.Duration) {
	b.t.Helper()
	const znode = "/flock-e2e-foo"
	if out, err := b.exec(set+"-0", container, "sh", "-c", `timeout 60 zkCli.sh -server 127.0.0.1:2181 create "$1" bar`, "sh", znode); err != nil || !strings.Contains(out, "Created "+znode) {
		b.t.Fatalf("create %s through %s-0: %v\n%s", znode, set, err, out)
	}
	gone := b.restartSet(set, selector, 3)
	start := time.Now()
	b.waitZookeeper(set, container, 3, marker, timeout)
	b.t.Logf("e2e restart: pods gone after %s, ensemble back after %s more", gone.Round(time.Second), time.Since(start).Round(time.Second))
	if out, err := b.exec(set+"-2", container, "sh", "-c", `timeout 60 zkCli.sh -server 127.0.0.1:2181 get "$1" 2>&1`, "sh", znode); err != nil || !strings.Contains(out, "\nbar\n") {
		b.t.Errorf("get %s on %s-2 after the restart, want bar: %v\n%s", znode, set, err, out)
	}
}

// applyDirWith applies each resource of dir's kustomization.yaml, in
// order, for the real node, after edit (when not nil) had its say.
func (b *bed) applyDirWith(dir string, edit func(*unstructured.Unstructured)) {
	b.t.Helper()
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(repoFile(b.t, dir+"/kustomization.yaml"), &k); err != nil {
		b.t.Fatal(err)
	}
	for _, r := range k.Resources {
		b.apply(repoFile(b.t, dir+"/"+r), func(o *unstructured.Unstructured) {
			b.forRealNode(o)
			if edit != nil {
				edit(o)
			}
		})
	}
}

// upstreamInstall makes the install init container copy upstream's
// peer-finder instead of flock's: the same manifest otherwise.
func upstreamInstall(t *testing.T) func(*unstructured.Unstructured) {
	return func(o *unstructured.Unstructured) {
		if o.GetKind() != "StatefulSet" {
			return
		}
		inits, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
		found := false
		for _, c := range inits {
			if m := c.(map[string]any); m["name"] == "install" {
				m["image"] = "ghcr.io/flockd/apps/upstream-peer-finder:dev"
				found = true
			}
		}
		if !found {
			t.Fatal("upstream shape: no install init container")
		}
		_ = unstructured.SetNestedSlice(o.Object, inits, "spec", "template", "spec", "initContainers")
	}
}

// TestAppZookeeperUpstreamShape applies examples/apps/zookeeper/upstream-shape
// (Kubernetes' e2e manifest: install copies peer-finder and on-start.sh into
// /work-dir, bootstrap runs /work-dir/peer-finder
// -on-start="/work-dir/on-start.sh" -service=zk with the quotes in the
// argument) twice, each in its own namespace. With flock's binary the
// script runs and the three members form one ensemble. With upstream's
// binary in the same manifest, peer-finder execs the name with its quotes,
// runs nothing and fails: the init container restarts forever, ZooKeeper
// never starts, zoo-0 never becomes ready, and under OrderedReady no other
// member is even created.
func TestAppZookeeperUpstreamShape(t *testing.T) {
	t.Parallel()
	const dir = "examples/apps/zookeeper/upstream-shape"
	t.Run("flock", func(t *testing.T) {
		t.Parallel()
		b := newBed(t)
		b.applyDirWith(dir, nil)
		start := time.Now()
		b.waitZookeeper("zoo", apps.ZookeeperContainer, 3, "", 8*time.Minute)
		t.Logf("3 members formed one ensemble after %s", time.Since(start).Round(time.Second))
		log := b.logs("zoo-0", "bootstrap", false)
		if len(logtest.Find(logtest.ParseText(log), "hook ran", "command", "/work-dir/on-start.sh")) == 0 { // the quotes stripped
			t.Errorf("zoo-0's peer-finder does not say it ran /work-dir/on-start.sh:\n%s", log)
		}
		if log := b.logs("zoo-2", "bootstrap", false); !strings.Contains(log, "on-start: added as server.3=") {
			t.Errorf("zoo-2 was not added by on-start.sh:\n%s", log)
		}
		marker := b.markZookeeper("zoo-0", apps.ZookeeperContainer)
		b.e2eRestartZookeeper("zoo", apps.ZookeeperContainer, "app=zk", marker, 6*time.Minute)
	})
	t.Run("upstream", func(t *testing.T) {
		t.Parallel()
		b := newBed(t)
		b.applyDirWith(dir, upstreamInstall(t))
		// peer-finder finds zoo-0 in the SRV records and execs the name
		// with its quotes: no such file. It never runs on-start.sh, and
		// the kubelet retries the init container with back-off.
		b.waitPod("zoo-0", "bootstrap restarted twice", 4*time.Minute, func(p *corev1.Pod) bool {
			for _, s := range p.Status.InitContainerStatuses {
				if s.Name == "bootstrap" && s.RestartCount >= 2 {
					return true
				}
			}
			return false
		})
		// The previous run's log is asked for again while the kubelet
		// restarts the container: between two attempts it may have none
		// to give ("unable to retrieve container logs", seen in CI).
		var log string
		b.WaitFor(t, "upstream's peer-finder in zoo-0's bootstrap (previous run) tried the quoted name", time.Minute, func(context.Context) (bool, error) {
			log = b.logs("zoo-0", "bootstrap", true)
			return strings.Contains(log, `execing: "/work-dir/on-start.sh"`), fmt.Errorf("previous run's log:\n%s", log)
		})
		t.Logf("upstream's peer-finder in zoo-0's bootstrap (previous run):\n%s", log)
		pod, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), "zoo-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s := status(pod, "zk"); s != nil && (s.State.Running != nil || s.State.Terminated != nil || s.RestartCount > 0) {
			t.Errorf("zoo-0's ZooKeeper started without on-start.sh having run: %+v", s.State)
		}
		if clustertest.PodReady(pod) {
			t.Error("zoo-0 is ready")
		}
		pods, err := b.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=zk"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 {
			t.Errorf("%d pods, want zoo-0 only (never ready, OrderedReady creates no other)", len(pods.Items))
		}
	})
}
