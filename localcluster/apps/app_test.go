package apps

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flockd/flock/localcluster"
)

// TestZookeeperProgress: every step of an ensemble's bootstrap raises the
// score.
func TestZookeeperProgress(t *testing.T) {
	down := ZookeeperView{Pod: "zk-1", Err: "not serving"}
	looking := ParseZookeeper("zk-1", zkOut("", "0", 1))
	leader := ParseZookeeper("zk-0", zkOut("leader", "100000000", 0))
	leader2 := ParseZookeeper("zk-0", zkOut("leader", "100000003", 0, 1))
	follower := ParseZookeeper("zk-1", zkOut("follower", "100000003", 0, 1))
	marked := follower
	marked.Marker = MarkerPrefix + "x"
	steps := [][]ZookeeperView{
		{down},
		{looking},
		{leader, looking},
		{leader2, looking},
		{leader2, follower},
		{leader2, marked},
	}
	rising(t, steps, ZookeeperProgress)
}

// TestZookeeperSplit: two members leading different configurations are two
// ensembles; two leaders of one configuration (a leader change seen
// half-way) and one leader are not.
func TestZookeeperSplit(t *testing.T) {
	alone := ParseZookeeper("zk-1", zkOut("leader", "100000000", 1))
	leader := ParseZookeeper("zk-0", zkOut("leader", "100000003", 0, 1, 2))
	same := ParseZookeeper("zk-2", zkOut("leader", "100000003", 0, 1, 2))
	follower := ParseZookeeper("zk-2", zkOut("follower", "100000003", 0, 1, 2))
	for _, c := range []struct {
		views []ZookeeperView
		split bool
	}{
		{[]ZookeeperView{leader, follower}, false},
		{[]ZookeeperView{leader, same}, false},
		{[]ZookeeperView{leader, alone, follower}, true},
		{[]ZookeeperView{leader, {Pod: "zk-1", Mode: "standalone"}}, true},
	} {
		if got := ZookeeperSplit(c.views); (got != "") != c.split {
			t.Errorf("ZookeeperSplit(%+v) = %q, want split %v", c.views, got, c.split)
		}
	}
}

// TestRedisProgress: every step of a replication's bootstrap raises the
// score.
func TestRedisProgress(t *testing.T) {
	down := RedisView{Pod: "redis-1", Err: "connection refused"}
	primary0 := ParseRedisInfo("redis-0", "role:master\r\nconnected_slaves:0\r\n")
	linking := ParseRedisInfo("redis-1", "role:slave\r\nmaster_host:redis-0.redis\r\nmaster_link_status:down\r\n")
	primary := ParseRedisInfo("redis-0", primaryInfo)
	linked := ParseRedisInfo("redis-1", replicaInfo)
	steps := [][]RedisView{
		{down, down},
		{primary0, down},
		{primary0, linking},
		{primary0, linked},
		{primary, linked},
	}
	rising(t, steps, RedisProgress)
}

// TestPlanPeak: a round runs its replicas, or the size it scales up to
// when larger; a scale-down does not lower the peak.
func TestPlanPeak(t *testing.T) {
	for _, c := range []struct {
		p    Plan
		want int
	}{
		{Plan{Replicas: 3}, 3},
		{Plan{Replicas: 3, ScaleAt: time.Second, ScaleTo: 5}, 5},
		{Plan{Replicas: 5, ScaleAt: time.Second, ScaleTo: 3}, 5},
		{Plan{Replicas: 3, ScaleTo: 5}, 3}, // no scale planned
	} {
		if got := c.p.Peak(); got != c.want {
			t.Errorf("%+v: Peak() = %d, want %d", c.p, got, c.want)
		}
	}
}

// TestDrawNodeFault: the schedule is the seed's, in its ranges, drawn in
// about the share of rounds asked for, never at probability 0 and always
// at 1.
func TestDrawNodeFault(t *testing.T) {
	const seed, rounds = 42, 1000
	faulted, kills := 0, 0
	for r := range rounds {
		f := DrawNodeFault(seed, r, 3, 0.3)
		if !reflect.DeepEqual(f, DrawNodeFault(seed, r, 3, 0.3)) {
			t.Fatalf("round %d: two draws differ", r)
		}
		if DrawNodeFault(seed, r, 3, 0) != nil || DrawNodeFault(seed, r, 3, 1) == nil {
			t.Fatalf("round %d: probability 0 drew a fault or 1 none", r)
		}
		if f == nil {
			continue
		}
		faulted++
		if f.Fault == localcluster.NodeKill {
			kills++
		} else if f.Fault != localcluster.NodeStop {
			t.Errorf("round %d: fault %q", r, f.Fault)
		}
		if f.Member < 0 || f.Member > 2 || f.At < 0 || f.At >= 30e9 || f.Down < 15e9 || f.Down >= 60e9 {
			t.Errorf("round %d: %+v out of range", r, *f)
		}
	}
	if faulted < 250 || faulted > 350 || kills < faulted/3 || kills > 2*faulted/3 {
		t.Errorf("%d of %d rounds faulted (%d kills) at probability 0.3", faulted, rounds, kills)
	}
}

// TestAppsHaveExamples: every registered application has the example the
// campaign creates (see App): one StatefulSet, with an init container (the
// campaign's skew runs in the last one's image) and one claim template
// named data (the wipe deletes data-<set>-0), and what upstream's subject
// needs (an install init container).
func TestAppsHaveExamples(t *testing.T) {
	for name := range Apps {
		manifests, err := Manifests(filepath.Join("..", "..", "examples", "apps", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sets := 0
		for _, m := range manifests {
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(m), 4096)
			for {
				var o unstructured.Unstructured
				if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if o.GetKind() != "StatefulSet" {
					continue
				}
				sets++
				inits, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
				claims, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
				if len(inits) == 0 || len(claims) != 1 || claims[0].(map[string]any)["metadata"].(map[string]any)["name"] != "data" {
					t.Errorf("%s: StatefulSet %s: want an init container and one claim template named data", name, o.GetName())
				}
				if err := shape(&o, Upstream, NewPlan(1, 1, 3)); err != nil {
					t.Errorf("%s: StatefulSet %s: upstream's subject: %v", name, o.GetName(), err)
				}
			}
		}
		if sets != 1 {
			t.Errorf("%s: %d StatefulSets, want 1", name, sets)
		}
	}
}

// rising fails t unless score rises from each step's views to the next.
func rising[V any](t *testing.T, steps [][]V, score func([]V) int) {
	t.Helper()
	prev := -1
	for i, views := range steps {
		p := score(views)
		if p <= prev {
			t.Errorf("step %d: progress %d, not above the step before's %d", i, p, prev)
		}
		prev = p
	}
}
