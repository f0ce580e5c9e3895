package apps

import (
	"testing"
	"time"
)

// TestEtcdProgress: every step of a bootstrap raises the score, and views
// that say the same say the same score.
func TestEtcdProgress(t *testing.T) {
	noPod := EtcdView{Pod: "etcd-1", Err: errNoPodIP}
	refused := EtcdView{Pod: "etcd-1", Err: "member list: connection refused"}
	learner := EtcdView{Pod: "etcd-1", ClusterID: 7, Members: []string{"etcd-0", ""}, Err: "health: no leader"}
	started := EtcdView{Pod: "etcd-1", ClusterID: 7, Members: []string{"etcd-0", "etcd-1"}, Err: "health: no leader"}
	healthy := EtcdView{Pod: "etcd-1", ClusterID: 7, Members: []string{"etcd-0", "etcd-1"}, Healthy: true}
	first := EtcdView{Pod: "etcd-0", ClusterID: 7, Members: []string{"etcd-0"}, Healthy: true}
	steps := [][]EtcdView{
		{noPod},
		{refused},
		{first, noPod},
		{first, refused},
		{first, learner},
		{first, started},
		{first, healthy},
	}
	prev := -1
	for i, views := range steps {
		p := EtcdProgress(views)
		if p <= prev {
			t.Errorf("step %d: progress %d, not above the step before's %d", i, p, prev)
		}
		if again := EtcdProgress(views); again != p {
			t.Errorf("step %d: %d then %d for the same views", i, p, again)
		}
		prev = p
	}
}

// TestStallClock: a flat score stalls after the stall time; a rise, or a
// drop and rise, restarts it; zero stall never stalls.
func TestStallClock(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	c := stallClock{last: -1, rise: t0}
	c.observe(3, at(1))
	c.observe(3, at(60))
	if c.stalled(at(120), 2*time.Minute) {
		t.Error("stalled 119 s after the last rise, stall 2m")
	}
	if !c.stalled(at(122), 2*time.Minute) {
		t.Error("not stalled 121 s after the last rise, stall 2m")
	}
	c.observe(1, at(122)) // a member killed
	c.observe(3, at(130)) // and back
	if c.stalled(at(200), 2*time.Minute) {
		t.Error("stalled 70 s after a recovery")
	}
	if c.stalled(at(10_000), 0) {
		t.Error("stalled with a zero stall time")
	}
}
