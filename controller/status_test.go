package controller

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

func pod(name, node string, ready bool) corev1.Pod {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}},
	}
}

func phaseRunning(p corev1.Pod) corev1.Pod {
	p.Status.Phase = corev1.PodRunning
	return p
}

func rolledOut(n int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Status:     appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, CurrentRevision: "r", UpdateRevision: "r"},
	}
}

func TestStatus(t *testing.T) {
	type conds struct{ available, progressing, degraded metav1.ConditionStatus }
	tests := []struct {
		name      string
		obs       Observed
		replicas  int32
		ready     int32
		conds     conds
		members   map[int32]string // ordinal -> node
		waiting   map[int32]string
		degReason string
	}{{
		name: "all ready",
		obs: Observed{Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3),
			Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3"}},
			Pods:      []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n2", true), pod("zk-2", "n3", true)}},
		replicas: 3, ready: 3, conds: conds{"True", "False", "False"},
		members: map[int32]string{0: "n1", 1: "n2", 2: "n3"},
	}, {
		name: "scaling up",
		obs: Observed{Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(2),
			Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3"}},
			Pods:      []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n2", true)}},
		replicas: 2, ready: 2, conds: conds{"False", "True", "False"},
		members: map[int32]string{0: "n1", 1: "n2", 2: "n3"},
	}, {
		name: "member waits for its cordoned node",
		obs: Observed{Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3),
			Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3"}, Waiting: map[int32]string{1: WaitNodeUnschedulable}},
			Pods:      []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "", false), pod("zk-2", "n3", true)}},
		replicas: 3, ready: 2, conds: conds{"False", "False", "True"}, degReason: "MembersWaiting",
		members: map[int32]string{0: "n1", 1: "n2", 2: "n3"}, waiting: map[int32]string{1: WaitNodeUnschedulable},
	}, {
		name: "member still running on its cordoned node is fine",
		obs: Observed{Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3),
			Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3"}, Waiting: map[int32]string{1: WaitNodeUnschedulable}},
			Pods:      []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n2", true), pod("zk-2", "n3", true)}},
		replicas: 3, ready: 3, conds: conds{"True", "False", "False"},
		members: map[int32]string{0: "n1", 1: "n2", 2: "n3"},
	}, {
		name: "member on a node that is not Ready waits, though its pod's last status says running",
		obs: Observed{Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3),
			Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3"}, Waiting: map[int32]string{1: WaitNodeNotReady}},
			Pods:      []corev1.Pod{pod("zk-0", "n1", true), phaseRunning(pod("zk-1", "n2", false)), pod("zk-2", "n3", true)}},
		replicas: 3, ready: 2, conds: conds{"False", "False", "True"}, degReason: "MembersWaiting",
		members: map[int32]string{0: "n1", 1: "n2", 2: "n3"}, waiting: map[int32]string{1: WaitNodeNotReady},
	}, {
		name: "no node for member 2",
		obs: Observed{Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(2),
			Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2"}, Waiting: map[int32]string{2: WaitNoEligibleNode}},
			Pods:      []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n2", true)}},
		replicas: 2, ready: 2, conds: conds{"False", "False", "True"}, degReason: "MembersWaiting",
		members: map[int32]string{0: "n1", 1: "n2", 2: ""}, waiting: map[int32]string{2: WaitNoEligibleNode},
	}, {
		name: "scaled down: removed members listed inactive, not counted",
		obs: Observed{Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3),
			Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3", 3: "n4"}},
			Pods:      []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n2", true), pod("zk-2", "n3", true), pod("zk-3", "n4", true)}},
		replicas: 4, ready: 4, conds: conds{"False", "True", "False"},
		members: map[int32]string{0: "n1", 1: "n2", 2: "n3", 3: "n4"},
	}, {
		name: "network storage: nodes from pods; foreign pods ignored",
		obs: Observed{Mode: flockv1.ModeNetworkStorage, StatefulSet: rolledOut(3),
			Pods: []corev1.Pod{pod("zk-0", "a", true), pod("zk-1", "b", true), pod("zk-2", "c", true), pod("zkx-0", "d", true)}},
		replicas: 3, ready: 3, conds: conds{"True", "False", "False"},
		members: map[int32]string{0: "a", 1: "b", 2: "c"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFlock()
			if tt.name == "scaled down: removed members listed inactive, not counted" {
				f.Spec.Replicas = new(int32(2))
			}
			tt.obs.Flock = f
			st := Status(tt.obs)
			if st.Replicas != tt.replicas || st.ReadyReplicas != tt.ready {
				t.Errorf("replicas/ready = %d/%d, want %d/%d", st.Replicas, st.ReadyReplicas, tt.replicas, tt.ready)
			}
			if st.ObservedGeneration != 3 || st.Mode != tt.obs.Mode || st.Selector != "flockd.io/flock=zk" {
				t.Errorf("observedGeneration %d, mode %s, selector %q", st.ObservedGeneration, st.Mode, st.Selector)
			}
			for typ, want := range map[string]metav1.ConditionStatus{
				flockv1.ConditionAvailable: tt.conds.available, flockv1.ConditionProgressing: tt.conds.progressing, flockv1.ConditionDegraded: tt.conds.degraded,
			} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Status != want || c.ObservedGeneration != 3 {
					t.Errorf("condition %s = %+v, want %s", typ, c, want)
				}
			}
			if tt.degReason != "" {
				if c := meta.FindStatusCondition(st.Conditions, flockv1.ConditionDegraded); c.Reason != tt.degReason {
					t.Errorf("Degraded reason = %s, want %s", c.Reason, tt.degReason)
				}
			}
			gotMembers, gotWaiting := map[int32]string{}, map[int32]string{}
			for _, m := range st.Members {
				gotMembers[m.Ordinal] = m.Node
				if m.Waiting != "" {
					gotWaiting[m.Ordinal] = m.Waiting
				}
				if m.Active != (m.Ordinal < *f.Spec.Replicas) {
					t.Errorf("member %d active = %v", m.Ordinal, m.Active)
				}
			}
			if !maps.Equal(gotMembers, tt.members) {
				t.Errorf("members = %v, want %v", gotMembers, tt.members)
			}
			if len(tt.waiting) > 0 || len(gotWaiting) > 0 {
				if !maps.Equal(gotWaiting, tt.waiting) {
					t.Errorf("waiting = %v, want %v", gotWaiting, tt.waiting)
				}
			}
		})
	}
}

func TestStatusKeepsTransitionTime(t *testing.T) {
	f := testFlock()
	obs := Observed{Flock: f, Mode: flockv1.ModeNetworkStorage, StatefulSet: rolledOut(3),
		Pods: []corev1.Pod{pod("zk-0", "a", true), pod("zk-1", "b", true), pod("zk-2", "c", true)}}
	first := Status(obs)
	past := metav1.NewTime(meta.FindStatusCondition(first.Conditions, flockv1.ConditionAvailable).LastTransitionTime.Add(-3600e9))
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime = past
	}
	f.Status = first
	again := Status(obs)
	if got := meta.FindStatusCondition(again.Conditions, flockv1.ConditionAvailable).LastTransitionTime; !got.Equal(&past) {
		t.Errorf("unchanged condition moved its transition time to %v", got)
	}
}

func TestErrorStatusKeepsTheLastGoodStatus(t *testing.T) {
	good := Status(Observed{Flock: testFlock(), Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3),
		Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3"}},
		Pods:      []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n2", true), pod("zk-2", "n3", true)}})
	long := errors.New("apply StatefulSet zk: " + strings.Repeat("forbidden ", 5000))
	st := ErrorStatus(good, 4, long)
	if st.ObservedGeneration != good.ObservedGeneration || st.Replicas != 3 || st.ReadyReplicas != 3 || !slices.Equal(st.Members, good.Members) || st.Mode != good.Mode || st.Selector != good.Selector {
		t.Errorf("error status %+v, want the last good one %+v with a Degraded condition", st, good)
	}
	c := meta.FindStatusCondition(st.Conditions, flockv1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ReconcileError" || c.ObservedGeneration != 4 || len(c.Message) > maxMessage || !strings.HasPrefix(c.Message, "apply StatefulSet zk: forbidden") {
		t.Errorf("Degraded = %+v (message %d bytes)", c, len(c.Message))
	}
	if a := meta.FindStatusCondition(st.Conditions, flockv1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v, want the last good True", a)
	}
	if good.Conditions[0].Type == "" || meta.FindStatusCondition(good.Conditions, flockv1.ConditionDegraded).Status != metav1.ConditionFalse {
		t.Errorf("ErrorStatus changed its input: %+v", good.Conditions)
	}
}

func TestStatusMovingFrom(t *testing.T) {
	f := testFlock()
	f.Status.Members = []flockv1.MemberStatus{{Ordinal: 0, Node: "n1", Active: true}, {Ordinal: 1, Node: "n4", Active: true, MovingFrom: "n2"}, {Ordinal: 2, Node: "n3", Active: true}}
	tests := []struct {
		name string
		obs  Observed
		want map[int32]string
	}{{
		name: "move started now is recorded",
		obs: Observed{Placement: Placement{Assign: map[int32]string{0: "n5", 1: "n4", 2: "n3"}, Started: map[int32]string{0: "n1"}},
			Pods: []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n2", true), pod("zk-2", "n3", true)}},
		want: map[int32]string{0: "n1", 1: "n2"},
	}, {
		name: "member still on its old node or not ready keeps moving",
		obs: Observed{Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n4", 2: "n3"}},
			Pods: []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n4", false), pod("zk-2", "n3", true)}},
		want: map[int32]string{1: "n2"},
	}, {
		name: "ready on the new node: the move is done",
		obs: Observed{Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n4", 2: "n3"}},
			Pods: []corev1.Pod{pod("zk-0", "n1", true), pod("zk-1", "n4", true), pod("zk-2", "n3", true)}},
		want: map[int32]string{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Flock, tt.obs.Mode, tt.obs.StatefulSet = f, flockv1.ModeNodePinned, rolledOut(3)
			got := map[int32]string{}
			for _, m := range Status(tt.obs).Members {
				if m.MovingFrom != "" {
					got[m.Ordinal] = m.MovingFrom
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("movingFrom = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatusNodeLoss(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	now := t0.Add(5*time.Minute + 300*time.Millisecond)
	f := testFlock()
	f.Status.Members = []flockv1.MemberStatus{
		{Ordinal: 0, Node: "n1", Active: true, Waiting: WaitNodeNotReady, WaitingSince: &metav1.Time{Time: t0}},
		{Ordinal: 1, Node: "n2", Active: true, Waiting: WaitNodeUnschedulable, WaitingSince: &metav1.Time{Time: t0}},
		{Ordinal: 2, Node: "n3", Active: true, MovingFrom: "n9", MoveReason: MoveRequested},
	}
	obs := Observed{Flock: f, Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3), Now: now,
		Placement: Placement{
			Assign:  map[int32]string{0: "n1", 1: "n2", 2: "n4"},
			Waiting: map[int32]string{0: WaitNodeGone, 1: WaitNodeNotReady},
			Started: map[int32]string{2: "n3"}, NodeLost: map[int32]time.Duration{2: time.Hour},
			Held: map[int32]string{0: "not moved: member 1 is not Ready either"},
		},
		Pods: []corev1.Pod{pod("zk-2", "n3", false)}}
	st := Status(obs)
	byOrd := map[int32]flockv1.MemberStatus{}
	for _, m := range st.Members {
		byOrd[m.Ordinal] = m
	}
	// NotReady, then gone: one loss, its start kept.
	if m := byOrd[0]; m.WaitingSince == nil || !m.WaitingSince.Time.Equal(t0) {
		t.Errorf("member 0 waitingSince = %v, want %v (the node was lost all along)", m.WaitingSince, t0)
	}
	// Unschedulable, then lost: a new wait, from now (to the second).
	if m := byOrd[1]; m.WaitingSince == nil || !m.WaitingSince.Time.Equal(now.Truncate(time.Second)) {
		t.Errorf("member 1 waitingSince = %v, want %v", m.WaitingSince, now.Truncate(time.Second))
	}
	if m := byOrd[2]; m.MovingFrom != "n3" || m.MoveReason != MoveNodeLost || m.Waiting != "" || m.WaitingSince != nil {
		t.Errorf("member 2 = %+v, want moving from n3 because NodeLost, not waiting", m)
	}
	deg := meta.FindStatusCondition(st.Conditions, flockv1.ConditionDegraded)
	if deg == nil || !strings.Contains(deg.Message, "zk-0: node n1 is gone") || !strings.Contains(deg.Message, "member 1 is not Ready either") {
		t.Errorf("Degraded = %+v, want member 0's wait and why it did not move", deg)
	}
}

func TestStatusVolumeWaits(t *testing.T) {
	pv := func(ord, node, host string, phase corev1.PersistentVolumePhase) corev1.PersistentVolume {
		f := testFlock()
		v := localVolume(f, localStorage(f), "data", 0, node, host)
		v.Labels[flockv1.MemberLabel] = ord
		v.Status.Phase = phase
		return *v
	}
	tests := []struct {
		name string
		vols []corev1.PersistentVolume
		pod  corev1.Pod
		want string
	}{
		{name: "bound volume, pod pending: not a volume wait", vols: []corev1.PersistentVolume{pv("1", "n2", "n2", corev1.VolumeBound)}, pod: pod("zk-1", "", false)},
		{name: "released volume on its node", vols: []corev1.PersistentVolume{pv("1", "n2", "n2", corev1.VolumeReleased)}, pod: pod("zk-1", "", false), want: WaitVolumeReleased},
		{name: "released volume on another node (old data of a move)", vols: []corev1.PersistentVolume{pv("1", "n9", "n9", corev1.VolumeReleased), pv("1", "n2", "n2", corev1.VolumeBound)}, pod: pod("zk-1", "", false)},
		{name: "node relabelled away from the volume's hostname", vols: []corev1.PersistentVolume{pv("1", "n2", "old-host", corev1.VolumeBound)}, pod: pod("zk-1", "", false), want: WaitNodeRelabelled},
		{name: "relabelled but still running there", vols: []corev1.PersistentVolume{pv("1", "n2", "old-host", corev1.VolumeBound)}, pod: pod("zk-1", "n2", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Status(Observed{Flock: testFlock(), Mode: flockv1.ModeNodePinned, StatefulSet: rolledOut(3),
				Placement: Placement{Assign: map[int32]string{0: "n1", 1: "n2", 2: "n3"}},
				Pods:      []corev1.Pod{pod("zk-0", "n1", true), tt.pod, pod("zk-2", "n3", true)},
				Volumes:   tt.vols, Hostnames: map[string]string{"n1": "n1", "n2": "n2", "n3": "n3"}})
			if got := memberMap(st)[1].Waiting; got != tt.want {
				t.Errorf("member 1 waiting = %q, want %q", got, tt.want)
			}
		})
	}
}

func memberMap(st flockv1.FlockStatus) map[int32]flockv1.MemberStatus {
	out := map[int32]flockv1.MemberStatus{}
	for _, m := range st.Members {
		out[m.Ordinal] = m
	}
	return out
}

func TestConditionMessagesAreBounded(t *testing.T) {
	f := testFlock()
	f.Spec.Replicas = new(int32(1000))
	waiting := map[int32]string{}
	for i := range int32(1000) {
		waiting[i] = WaitNoEligibleNode
	}
	st := Status(Observed{Flock: f, Mode: flockv1.ModeNodePinned, Placement: Placement{Assign: map[int32]string{}, Waiting: waiting}})
	c := meta.FindStatusCondition(st.Conditions, flockv1.ConditionDegraded)
	if c == nil || c.Reason != "MembersWaiting" || len(c.Message) > maxMessage || !strings.HasSuffix(c.Message, "and 990 more") {
		t.Errorf("Degraded = %s %q (%d bytes)", c.Reason, c.Message, len(c.Message))
	}
	if len(st.Members) != 1000 {
		t.Errorf("%d members listed, want 1000", len(st.Members))
	}
}

func TestCurrentAssignments(t *testing.T) {
	pv := func(ord, node string, phase corev1.PersistentVolumePhase) corev1.PersistentVolume {
		return corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{flockv1.MemberLabel: ord}, Annotations: map[string]string{nodeAnnotation: node}},
			Status:     corev1.PersistentVolumeStatus{Phase: phase},
		}
	}
	deleting := func(pv corev1.PersistentVolume) corev1.PersistentVolume {
		pv.DeletionTimestamp = &metav1.Time{}
		return pv
	}
	tests := []struct {
		name    string
		members []flockv1.MemberStatus
		pvs     []corev1.PersistentVolume
		want    map[int32]string
	}{
		{name: "empty", want: map[int32]string{}},
		{name: "status only (volumes not yet created)", members: []flockv1.MemberStatus{{Ordinal: 0, Node: "n1"}, {Ordinal: 1}}, want: map[int32]string{0: "n1"}},
		{name: "volumes only (status lost, Flock recreated)", pvs: []corev1.PersistentVolume{pv("0", "n1", corev1.VolumeBound), pv("1", "n2", corev1.VolumeAvailable)}, want: map[int32]string{0: "n1", 1: "n2"}},
		{name: "volumes win over a disagreeing status", members: []flockv1.MemberStatus{{Ordinal: 0, Node: "n9"}}, pvs: []corev1.PersistentVolume{pv("0", "n1", corev1.VolumeBound)}, want: map[int32]string{0: "n1"}},
		{name: "move in progress: status picks among the volumes", members: []flockv1.MemberStatus{{Ordinal: 0, Node: "n2"}}, pvs: []corev1.PersistentVolume{pv("0", "n1", corev1.VolumeBound), pv("0", "n2", corev1.VolumeAvailable)}, want: map[int32]string{0: "n2"}},
		{name: "a bound volume beats a released one (old data of a move)", pvs: []corev1.PersistentVolume{pv("0", "n1", corev1.VolumeReleased), pv("0", "n2", corev1.VolumeBound)}, want: map[int32]string{0: "n2"}},
		{name: "status lost, claim deleted: the released volume holds the data, the member goes back there", pvs: []corev1.PersistentVolume{pv("0", "n2", corev1.VolumeReleased)}, want: map[int32]string{0: "n2"}},
		{name: "status names the released volume's node", members: []flockv1.MemberStatus{{Ordinal: 0, Node: "n2"}}, pvs: []corev1.PersistentVolume{pv("0", "n2", corev1.VolumeReleased)}, want: map[int32]string{0: "n2"}},
		{name: "recorded move wins before the new volume exists", members: []flockv1.MemberStatus{{Ordinal: 0, Node: "n3", MovingFrom: "n1"}}, pvs: []corev1.PersistentVolume{pv("0", "n1", corev1.VolumeBound)}, want: map[int32]string{0: "n3"}},
		{name: "a volume being deleted is no data", members: []flockv1.MemberStatus{{Ordinal: 0, Node: "n9"}}, pvs: []corev1.PersistentVolume{deleting(pv("0", "n1", corev1.VolumeBound))}, want: map[int32]string{0: "n9"}},
		{name: "unlabelled volume ignored", pvs: []corev1.PersistentVolume{pv("x", "n1", corev1.VolumeBound)}, want: map[int32]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CurrentAssignments(tt.members, tt.pvs); !maps.Equal(got, tt.want) {
				t.Errorf("CurrentAssignments = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOrdinal(t *testing.T) {
	f := &flockv1.Flock{ObjectMeta: metav1.ObjectMeta{Name: "zk"}}
	tests := []struct {
		pod  string
		want int32
		ok   bool
	}{{"zk-0", 0, true}, {"zk-12", 12, true}, {"zk-", -1, false}, {"zk-a", -1, false}, {"zkx-1", -1, false}, {"zk-1-2", -1, false}, {"zk-99999999999", -1, false}, {"zk-01", -1, false}}
	for _, tt := range tests {
		if got, ok := memberOrdinal(f, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.pod}}); got != tt.want || ok != tt.ok {
			t.Errorf("ordinal(zk, %q) = %d, %v; want %d, %v", tt.pod, got, ok, tt.want, tt.ok)
		}
	}
}
