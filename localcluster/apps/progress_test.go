package apps

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/localcluster"
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
	c.hold(at(300)) // a member's node down until 300 s
	if c.stalled(at(400), 2*time.Minute) {
		t.Error("stalled 100 s after a member's node came back")
	}
}

// TestNodeFaultHoldsTheStall: while a round's node fault holds a node
// down, the pods bound to it (being deleted too) hold the stall clock, and
// the others do not; once the node is started again, none does.
// zookeeper-11's round 4: zk-2 was bound to real-1 while three rounds'
// faults kept it down for 2m6s one after another, and the round was called
// stuck with zk-2 never started.
func TestNodeFaultHoldsTheStall(t *testing.T) {
	on := func(name, node string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node}}
	}
	zk2 := on("zk-2", "real-1")
	deleting := on("zk-1", "real-1")
	deleting.DeletionTimestamp = &metav1.Time{}
	others := []corev1.Pod{on("zk-0", "real-2"), on("zk-3", "")}
	faulted := make(chan localcluster.NodeFault)
	resume := make(chan struct{})
	c := &Campaign{
		Client: fake.NewClientset(&zk2),
		FaultNode: func(_ context.Context, node string, f localcluster.NodeFault) error {
			if node != "real-1" {
				t.Errorf("%s of node %s, want real-1 (zk-2's)", f, node)
			}
			faulted <- f
			<-resume
			return nil
		},
	}
	done := make(chan error)
	go func() {
		node, err := c.nodeOf(context.Background(), "ns", "zk-2", 0)
		if err == nil {
			err = c.nodeFault(context.Background(), node, "zk-2", NodeFault{Fault: localcluster.NodeKill})
		}
		done <- err
	}()
	check := func(when string, pods []corev1.Pod, want bool) {
		t.Helper()
		if got := c.onDownNode(pods); got != want {
			t.Errorf("%s: onDownNode(%v) = %v, want %v", when, names(pods), got, want)
		}
	}
	check("before the fault", []corev1.Pod{zk2}, false)
	if f := <-faulted; f != localcluster.NodeKill {
		t.Fatalf("first fault %s, want kill", f)
	}
	resume <- struct{}{}
	if f := <-faulted; f != localcluster.NodeStart {
		t.Fatalf("second fault %s, want start", f)
	}
	check("node down", []corev1.Pod{zk2}, true)
	check("node down", []corev1.Pod{deleting}, true)
	check("node down", append([]corev1.Pod{zk2}, others...), true)
	check("node down", others, false)
	resume <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	check("node started", []corev1.Pod{zk2, deleting}, false)
}

func names(pods []corev1.Pod) []string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name)
	}
	return n
}

// TestPodStarts: a pod's address, its init containers' end and each
// container's start each count once per pod; a restart of a container, a
// pod being deleted and a repeated observation add nothing; a new pod of
// the same name counts again, and so does a new sandbox's init run.
func TestPodStarts(t *testing.T) {
	pod := func(uid, ip string, initialized bool, containers ...corev1.ContainerStatus) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "galera-0", UID: types.UID(uid)}, Status: corev1.PodStatus{PodIP: ip, ContainerStatuses: containers}}
		if initialized {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
		}
		return p
	}
	inits := func(p corev1.Pod, id string, exit int32) corev1.Pod {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "bootstrap", ContainerID: "containerd://" + id,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}
		return p
	}
	running := corev1.ContainerStatus{Name: "mariadb", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	waiting := corev1.ContainerStatus{Name: "mariadb", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}
	restarted := corev1.ContainerStatus{Name: "mariadb", RestartCount: 1, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	deleting := pod("u2", "10.0.0.2", true, running)
	deleting.DeletionTimestamp = &metav1.Time{}
	seen := map[string]bool{}
	for i, step := range []struct {
		pods []corev1.Pod
		want int
	}{
		{pods: []corev1.Pod{pod("u1", "", false)}, want: 0},
		{pods: []corev1.Pod{pod("u1", "10.0.0.1", false, waiting)}, want: 1},
		{pods: []corev1.Pod{pod("u1", "10.0.0.1", true, waiting)}, want: 2},
		{pods: []corev1.Pod{pod("u1", "10.0.0.1", true, running)}, want: 3},
		{pods: []corev1.Pod{pod("u1", "10.0.0.1", true, restarted)}, want: 3},
		{pods: []corev1.Pod{pod("u1", "10.0.0.1", true, running), deleting}, want: 3},
		{pods: []corev1.Pod{pod("u3", "10.0.0.3", true, running)}, want: 6},
		// u3's init container ran: once per container id. A failing run
		// (a crash loop of an init container) and the same run seen again
		// add nothing; a run in a new sandbox (its node was killed) does.
		{pods: []corev1.Pod{inits(pod("u3", "10.0.0.3", true, running), "c1", 0)}, want: 7},
		{pods: []corev1.Pod{inits(pod("u3", "10.0.0.3", true, restarted), "c1", 0)}, want: 7},
		{pods: []corev1.Pod{inits(pod("u3", "10.0.0.3", true, restarted), "c2", 1)}, want: 7},
		{pods: []corev1.Pod{inits(pod("u3", "10.0.0.3", true, running), "c3", 0)}, want: 8},
	} {
		PodStarts(step.pods, seen)
		if len(seen) != step.want {
			t.Errorf("step %d: %d starts seen %v; want %d", i, len(seen), seen, step.want)
		}
	}
}

// TestTakeMark: a mark refused by a healthy cluster is stuck; refused by a
// cluster that went down after it was healthy (redis-11's round 14: a node
// killed by another round's fault under the primary right after the round
// was healthy), the cluster becomes healthy again and takes the mark.
func TestTakeMark(t *testing.T) {
	refused := errors.New("wait 4: 0 replicas acknowledged")
	future := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name          string
		marks         []error // each call of mark, in order
		healthy       bool
		settles       bool
		deadline      time.Time
		wantMark      string
		wantSettled   bool
		wantErr       error
		wantSettleRun int
	}{
		{name: "taken", marks: []error{nil}, wantMark: "m", wantSettled: true, deadline: future},
		{name: "refused by a healthy cluster", marks: []error{refused}, healthy: true, wantSettled: true, wantErr: refused, deadline: future},
		{name: "refused by a cluster gone down, healthy again", marks: []error{refused, nil}, settles: true, wantMark: "m", wantSettled: true, wantSettleRun: 1, deadline: future},
		{name: "refused by a cluster gone down, stuck there", marks: []error{refused}, wantSettleRun: 1, deadline: future},
		{name: "refused past the deadline", marks: []error{refused}, wantSettled: true, wantErr: refused, deadline: time.Now().Add(-time.Second)},
	} {
		calls, settleRuns := 0, 0
		mark := func() (string, error) {
			err := c.marks[min(calls, len(c.marks)-1)]
			calls++
			if err != nil {
				return "", err
			}
			return "m", nil
		}
		m, settled, err := takeMark(mark, func() bool { return c.healthy }, func() bool { settleRuns++; return c.settles }, c.deadline)
		if m != c.wantMark || settled != c.wantSettled || !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) || settleRuns != c.wantSettleRun {
			t.Errorf("%s: takeMark = %q, settled %v, %v, %d settles; want %q, %v, %v, %d", c.name, m, settled, err, settleRuns, c.wantMark, c.wantSettled, c.wantErr, c.wantSettleRun)
		}
	}
}
