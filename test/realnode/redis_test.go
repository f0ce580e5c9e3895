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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/localcluster/apps"
	"github.com/flockd/flock/localcluster/clustertest"
)

// waitRedis waits until the n pods of the redis StatefulSet are one primary
// and n-1 replicas of it, by redis-cli info replication in each pod, and
// returns the primary. It fails at once on a second primary.
func (b *bed) waitRedis(n int, timeout time.Duration) string {
	b.t.Helper()
	ex := apps.NewExec(b.Config, b.Client)
	pods := b.podNames("redis", n)
	var primary string
	b.waitApp(fmt.Sprintf("a primary with %d replicas", n-1), timeout, 2*time.Second, func() { b.dumpRedis(n + 2) }, func() error {
		v := apps.JudgeRedis(apps.ReadRedisAll(context.Background(), ex, b.ns, pods), pods)
		if v.Split() {
			b.t.Fatalf("two primaries: %s", v.Detail)
		}
		if !v.Healthy {
			return errors.New(v.Detail)
		}
		primary = v.Primary()
		return nil
	})
	return primary
}

// dumpRedis logs the containers' logs of the first n pods.
func (b *bed) dumpRedis(n int) {
	b.dumpContainers(b.podNames("redis", n), 0, "bootstrap", "redis", "peer-finder")
}

// redisCLI runs redis-cli -e ARGS in pod's redis container.
func (b *bed) redisCLI(pod string, args ...string) string {
	b.t.Helper()
	out, err := b.exec(pod, "redis", append([]string{"redis-cli", "-e"}, args...)...)
	if err != nil {
		b.t.Fatalf("%s: redis-cli %s: %v: %s", pod, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// checkKey fails unless every pod reads value for key.
func (b *bed) checkKey(pods []string, key, value string) {
	b.t.Helper()
	for _, p := range pods {
		if got := b.redisCLI(p, "get", key); got != value {
			b.t.Errorf("%s: get %s = %q, want %q (written through the first primary)", p, key, got, value)
		}
	}
}

// TestAppRedis applies examples/apps/redis as written and checks, with
// redis-cli info replication in each pod: the first member forms and the
// others are its replicas; scaled to 5 and back to 3 the same primary has
// exactly the pods as replicas; a deleted replica comes back as a replica
// of the same primary; the primary's pod deleted comes back as the primary
// (it has its data); the primary's pod and claim deleted (its data lost)
// while a replica does not answer, it comes back as a replica of a
// promoted replica, never a second primary, the other replica following
// that primary too,
// and a key written at the start is still on every member; that promoted
// primary scaled away, the remaining member's sidecar promotes it; every
// pod deleted at once, the same primary comes back.
func TestAppRedis(t *testing.T) {
	t.Parallel() // its own namespace
	b := newBed(t)
	b.applyKustomization("examples/apps/redis")
	start := time.Now()
	primary := b.waitRedis(3, 4*time.Minute)
	t.Logf("one primary and 2 replicas after %s: %s", time.Since(start).Round(time.Second), primary)
	if primary != "redis-0" {
		t.Errorf("primary %s, want redis-0 (the member told form)", primary)
	}
	b.waitDeliveredEvent("redis-0")
	value := b.ns
	b.redisCLI(primary, "set", "flock-check", value)

	// A replica of a replica (a member that was down while the replica it
	// followed came back without data and followed a promoted one, seen in
	// a campaign round): the next peer set's hook makes it follow the
	// primary directly.
	chained, via := "redis-2", "redis-1"
	if primary == via || primary == chained {
		t.Fatalf("primary %s: want neither %s nor %s", primary, chained, via)
	}
	b.redisCLI(chained, "replicaof", fmt.Sprintf("%s.redis.%s.svc.cluster.local", via, b.ns), "6379")
	b.scale("redis", 5)
	if got := b.waitRedis(5, 4*time.Minute); got != primary {
		t.Fatalf("scaled to 5: primary %s, want %s", got, primary)
	}
	b.scale("redis", 3)
	b.waitPods("app=redis", 3)
	if got := b.waitRedis(3, 3*time.Minute); got != primary {
		t.Fatalf("scaled back to 3: primary %s, want %s", got, primary)
	}

	b.deletePod("redis-1", "")
	if got := b.waitRedis(3, 3*time.Minute); got != primary {
		t.Fatalf("redis-1 re-created: primary %s, want %s", got, primary)
	}

	b.deletePod(primary, "")
	if got := b.waitRedis(3, 3*time.Minute); got != primary {
		t.Fatalf("the primary %s re-created with its data: primary %s, want %s again", primary, got, primary)
	}
	if log := b.logs(primary, "redis", false); !strings.Contains(log, "which has its data: the primary again") {
		t.Errorf("%s did not come back as the primary from its data:\n%s", primary, log)
	}
	// Everything written so far is on the replicas before the primary's
	// data goes.
	if n := b.redisCLI(primary, "wait", "2", "20000"); n != "2" {
		t.Fatalf("wait 2 20000 on %s: %s replicas acknowledged", primary, n)
	}

	// One replica does not answer while the primary's replacement decides
	// (a campaign round: it timed out under load), so the promotion does
	// not re-point it: it still follows the old primary's name, now a
	// replica of the promoted one. Its sidecar's hook runs again because
	// the replaced member's IP changed, and makes it follow the primary.
	paused := "redis-1"
	if paused == primary {
		paused = "redis-2"
	}
	b.redisCLI(paused, "client", "pause", "90000", "all")
	b.deletePod(primary, "data-"+primary)
	got := b.waitRedis(3, 5*time.Minute)
	if got == primary {
		t.Fatalf("%s re-created without its data is the primary: it must follow a promoted replica", primary)
	}
	if log := b.logs(primary, "redis", false); !strings.Contains(log, "whose data is gone") || !strings.Contains(log, "starting as a replica of "+got) {
		t.Errorf("%s did not promote a replica and follow it:\n%s", primary, log)
	}
	if got != paused {
		if log := b.logs(paused, "peer-finder", false); !strings.Contains(log, "following the primary "+got) {
			t.Errorf("%s (paused while %s decided) did not follow the primary %s from its hook:\n%s", paused, primary, got, log)
		}
	}
	t.Logf("after %s lost its data: primary %s", primary, got)
	b.checkKey(b.podNames("redis", 3), "flock-check", value)

	// The promoted primary scaled away (scale to 1 removes redis-1 and
	// redis-2): redis-0's sidecar sees its primary leave the set and
	// promotes redis-0. Scaled back, the former primary follows it.
	b.scale("redis", 1)
	b.waitPods("app=redis", 1)
	if p := b.waitRedis(1, 2*time.Minute); p != "redis-0" {
		t.Fatalf("%s scaled away: primary %s, want redis-0", got, p)
	}
	if log := b.logs("redis-0", "peer-finder", false); !strings.Contains(log, "left the peer set") || !strings.Contains(log, "promoting") {
		t.Errorf("redis-0's sidecar did not promote it:\n%s", log)
	}
	b.scale("redis", 3)
	if p := b.waitRedis(3, 4*time.Minute); p != "redis-0" {
		t.Fatalf("scaled back to 3: primary %s, want redis-0", p)
	}
	b.checkKey(b.podNames("redis", 3), "flock-check", value)

	// Every pod deleted at once, the claims kept: nobody answers at first,
	// so each member starts as its record says; the same primary.
	b.deletePods(b.podNames("redis", 3))
	if p := b.waitRedis(3, 4*time.Minute); p != "redis-0" {
		t.Fatalf("all pods re-created: primary %s, want redis-0", p)
	}
	b.checkKey(b.podNames("redis", 3), "flock-check", value)

	b.e2eRestartRedis()
}

// e2eRestartRedis is Kubernetes' e2e sequence on a formed redis
// StatefulSet of 3 whose primary is redis-0: a key written through it
// (member 0), the StatefulSet scaled to 0 and back to 3, the key read on
// redis-2 (a replica): redis-0 must be the primary again, with its data.
func (b *bed) e2eRestartRedis() {
	b.t.Helper()
	b.redisCLI("redis-0", "set", "foo", "bar")
	gone := b.restartSet("redis", "app=redis", 3)
	back := time.Now()
	if p := b.waitRedis(3, 4*time.Minute); p != "redis-0" {
		b.t.Fatalf("scaled to 0 and back to 3: primary %s, want redis-0", p)
	}
	b.t.Logf("e2e restart: pods gone after %s, primary and replicas back after %s more", gone.Round(time.Second), time.Since(back).Round(time.Second))
	b.checkKey([]string{"redis-2"}, "foo", "bar")
}

// deletePods deletes the pods at once and waits until each was re-created.
func (b *bed) deletePods(names []string) {
	b.t.Helper()
	ctx := context.Background()
	uids := map[string]types.UID{}
	for _, n := range names {
		p, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			b.t.Fatal(err)
		}
		uids[n] = p.UID
	}
	for _, n := range names {
		if err := b.Client.CoreV1().Pods(b.ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			b.t.Fatal(err)
		}
	}
	for _, n := range names {
		b.waitPod(n, "re-created", 2*time.Minute, func(p *corev1.Pod) bool { return p.UID != uids[n] })
	}
}

// TestAppRedisUpstreamShape applies examples/apps/redis/upstream-shape:
// Kubernetes' e2e Redis manifest (install + bootstrap init containers with
// the quoted -on-start, OrderedReady) with flock's peer-finder. It forms
// one primary, redis-0, with two replicas, and on-start.sh ran in each pod.
func TestAppRedisUpstreamShape(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.applyKustomization("examples/apps/redis/upstream-shape")
	start := time.Now()
	primary := b.waitRedis(3, 4*time.Minute)
	t.Logf("one primary and 2 replicas after %s: %s", time.Since(start).Round(time.Second), primary)
	if primary != "redis-0" {
		t.Errorf("primary %s, want redis-0 (the first pod OrderedReady starts)", primary)
	}
	for _, p := range b.podNames("redis", 3) {
		if log := b.logs(p, "bootstrap", false); !strings.Contains(log, "Bootstrap complete") {
			t.Errorf("%s: on-start.sh did not run:\n%s", p, log)
		}
	}
	b.e2eRestartRedis()
}

// TestAppRedisUpstreamShapeUpstreamBinary applies the same upstream-shape
// manifest with upstream's peer-finder in the install image (the only
// change): upstream execs the quoted -on-start value, "/work-dir/on-start.sh"
// with its quotes, which is no file, and its bootstrap container exits 1
// without running on-start.sh (seen on the real node), so redis-0 never
// starts and, with OrderedReady, no other pod is ever created.
func TestAppRedisUpstreamShapeUpstreamBinary(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	dir := "examples/apps/redis/upstream-shape"
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(repoFile(t, dir+"/kustomization.yaml"), &k); err != nil {
		t.Fatal(err)
	}
	swapped := 0
	for _, r := range k.Resources {
		b.apply(repoFile(t, dir+"/"+r), func(o *unstructured.Unstructured) {
			b.forRealNode(o)
			if o.GetKind() != "StatefulSet" {
				return
			}
			inits, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
			for _, c := range inits {
				if c := c.(map[string]any); c["name"] == "install" {
					c["image"] = "ghcr.io/flockd/apps/upstream-peer-finder:dev"
					swapped++
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, inits, "spec", "template", "spec", "initContainers")
		})
	}
	if swapped != 1 {
		t.Fatalf("swapped %d install images, want 1", swapped)
	}
	p := b.waitPod("redis-0", "with its bootstrap failed", 3*time.Minute, func(p *corev1.Pod) bool {
		s := status(p, "bootstrap")
		return s != nil && (s.RestartCount > 0 || s.State.Terminated != nil && s.State.Terminated.ExitCode != 0)
	})
	// Once restarted, the current container may not have written a line
	// yet: the run that ended has the whole log.
	boot := b.logs("redis-0", "bootstrap", status(p, "bootstrap").RestartCount > 0)
	if s := status(p, "bootstrap"); s.State.Terminated == nil && s.LastTerminationState.Terminated == nil {
		t.Errorf("redis-0's bootstrap: no termination in %+v", s)
	}
	if !strings.Contains(boot, `execing: "/work-dir/on-start.sh"`) || strings.Contains(boot, "Bootstrap complete") {
		t.Errorf("redis-0's bootstrap log: want upstream execing the quoted value and on-start.sh not run:\n%s", boot)
	}
	if s := status(p, "redis"); s != nil && (s.State.Running != nil || s.RestartCount > 0) {
		t.Errorf("redis-0's redis started: %+v", s)
	}
	if clustertest.PodReady(p) {
		t.Errorf("redis-0 is ready without a config")
	}
	if _, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), "redis-1", metav1.GetOptions{}); err == nil {
		t.Errorf("redis-1 exists: OrderedReady created it after a redis-0 that never got a config")
	}
}
