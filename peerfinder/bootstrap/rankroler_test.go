package bootstrap

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/peerfinder/peer"
)

// shutDown is db-0..db-(n-1) after a full shutdown: every pod re-created
// (new UIDs u0...), every claim kept, and the record naming db-0 of the
// earlier pods as the former.
func shutDown(t *testing.T, n int) *fake.Clientset {
	t.Helper()
	var objs []runtime.Object
	var members []Member
	for i := range n {
		name := fmt.Sprintf("db-%d", i)
		claim := Claim{Name: "data-" + name, UID: fmt.Sprintf("c%d", i)}
		objs = append(objs,
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Namespace: "ns", UID: types.UID(claim.UID)}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(fmt.Sprintf("u%d", i))}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}},
			}}})
		members = append(members, Member{Pod: name, UID: "old-" + name, Claims: []Claim{claim}})
	}
	lease := formedLease("db-0", "old-db-0")
	lease.Annotations[AnnotationMember] = fqdn("db-0")
	if err := setMembers(lease, members); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientset(append(objs, lease)...)
}

// rankRoler is pod's Roler under -form-rank with the shell command script.
func rankRoler(c *fake.Clientset, pod, script string, size, quorum int) *Roler {
	return &Roler{Lease: &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"},
		Data: &Data{Client: clientset.Wrap(c), Namespace: "ns"}, Pod: pod,
		Rank: RankCommand([]string{"sh", "-c", script}), RankQuorum: quorum, Size: func() int { return size }}
}

func threeMembers() peer.Set {
	return peer.NewSet(member("db-0", 0), member("db-1", 1), member("db-2", 2))
}

func TestRolerFormsByRank(t *testing.T) {
	ctx := t.Context()
	c := shutDown(t, 3)
	set := threeMembers()
	scripts := map[string]string{"db-0": "echo 10", "db-1": "echo 12", "db-2": "echo 11"}
	rolers := map[string]*Roler{}
	for pod, script := range scripts {
		rolers[pod] = rankRoler(c, pod, script, 3, 0)
	}
	// db-0 (the recorded former, by today's rule formed-with-this-data)
	// and db-2 wait for the missing ranks.
	for _, pod := range []string{"db-0", "db-2"} {
		if role, _, err := rolers[pod].Bootstrap(ctx, set, fqdn(pod)); !errors.Is(err, ErrNoRole) || role != "" {
			t.Fatalf("%s before every rank: %q, %v; want no role yet", pod, role, err)
		} else if !strings.Contains(err.Error(), "awaiting db-1") {
			t.Errorf("%s: %v; want db-1 named as awaited", pod, err)
		}
	}
	for _, pod := range []string{"db-1", "db-0", "db-2"} {
		role, former, err := rolers[pod].Bootstrap(ctx, set, fqdn(pod))
		want := "join"
		if pod == "db-1" {
			want = "form"
		}
		if err != nil || role != want || former != fqdn("db-1") {
			t.Errorf("%s: %q former %q, %v; want %s former %s", pod, role, former, err, want, fqdn("db-1"))
		}
	}
	rec, err := rolers["db-0"].Lease.Read(ctx)
	if err != nil || rec.Pod != "db-1" || rec.UID != "u1" || rec.Member != fqdn("db-1") {
		t.Fatalf("record %+v, %v; want db-1 (u1) recorded as the former", rec, err)
	}
	for pod, want := range map[string]Role{"db-0": Join, "db-1": Form, "db-2": Join} {
		if got := rec.Ranks[pod]; got.Role != want || got.UID == "" {
			t.Errorf("%s's entry %+v; want the running mark %s", pod, got, want)
		}
	}
	// A member that appears after the decision joins, whatever its rank.
	if err := c.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-3", Namespace: "ns", UID: "u3"}}); err != nil {
		t.Fatal(err)
	}
	late := rankRoler(c, "db-3", "echo 99", 4, 0)
	set4 := peer.NewSet(append(set.Peers(), member("db-3", 3))...)
	if role, former, err := late.Bootstrap(ctx, set4, fqdn("db-3")); err != nil || role != "join" || former != fqdn("db-1") {
		t.Errorf("db-3 after the decision: %q former %q, %v; want join %s", role, former, err, fqdn("db-1"))
	}
}

func TestRolerRankCommandFails(t *testing.T) {
	ctx := t.Context()
	c := shutDown(t, 3)
	set := threeMembers()
	failing := rankRoler(c, "db-1", "echo 'grastate.dat: Permission denied' >&2; exit 3", 3, 0)
	if _, _, err := failing.Bootstrap(ctx, set, fqdn("db-1")); !errors.Is(err, ErrNoRole) || !strings.Contains(err.Error(), "exit status 3: grastate.dat: Permission denied") {
		t.Fatalf("db-1 with a failing command: %v; want no role, its exit status and stderr", err)
	}
	obj, err := c.CoordinationV1().Leases("ns").Get(ctx, "db-formed", metav1.GetOptions{})
	if err != nil || !strings.Contains(obj.Annotations[AnnotationRankPrefix+"db-1"], "exit status 3") {
		t.Fatalf("db-1's entry %q, %v; want the failure recorded", obj.Annotations[AnnotationRankPrefix+"db-1"], err)
	}
	r0 := rankRoler(c, "db-0", "echo 10", 3, 0)
	r2 := rankRoler(c, "db-2", "echo 12", 3, 0)
	for _, r := range []*Roler{r0, r2, r0} {
		_, _, err := r.Bootstrap(ctx, set, fqdn(r.Pod))
		if !errors.Is(err, ErrNoRole) || !strings.Contains(err.Error(), "rank command failed in db-1") {
			t.Fatalf("%s: %v; want no role, db-1's failure named", r.Pod, err)
		}
	}
	// With a quorum of 2 the two ranks decide: db-2 forms.
	r0.RankQuorum, r2.RankQuorum = 2, 2
	if role, former, err := r0.Bootstrap(ctx, set, fqdn("db-0")); err != nil || role != "join" || former != fqdn("db-2") {
		t.Errorf("db-0 with a quorum of 2: %q former %q, %v; want join %s", role, former, err, fqdn("db-2"))
	}
	if role, _, err := r2.Bootstrap(ctx, set, fqdn("db-2")); err != nil || role != "form" {
		t.Errorf("db-2 with a quorum of 2: %q, %v; want form", role, err)
	}
	// db-1's command recovers after the decision: the record decides, join.
	failing.Rank = RankCommand([]string{"sh", "-c", "echo 50"})
	if role, _, err := failing.Bootstrap(ctx, set, fqdn("db-1")); err != nil || role != "join" {
		t.Errorf("db-1 after the decision: %q, %v; want join", role, err)
	}
}

// TestRolerWithoutRankUnchanged: without -form-rank the recorded former's
// successor mounting its claim forms, as before.
func TestRolerWithoutRankUnchanged(t *testing.T) {
	c := shutDown(t, 3)
	r := rankRoler(c, "db-0", "echo 1", 3, 0)
	r.Rank = nil
	if role, _, err := r.Bootstrap(t.Context(), threeMembers(), fqdn("db-0")); err != nil || role != "form" {
		t.Errorf("db-0 without -form-rank: %q, %v; want form (formed-with-this-data)", role, err)
	}
	obj, err := c.CoordinationV1().Leases("ns").Get(t.Context(), "db-formed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range obj.Annotations {
		if strings.HasPrefix(k, AnnotationRankPrefix) {
			t.Errorf("annotation %s written without -form-rank", k)
		}
	}
}

// TestRolerRankSkipsMembersThatNeverRan is the campaign's stuck round: the
// first member formed alone (OrderedReady), the StatefulSet was scaled to 5
// and the member was killed before it was Ready. Its new pod is the only
// one there can be until it is Ready, and the only member that ever ran: it
// forms again rather than await db-1..db-4 forever.
func TestRolerRankSkipsMembersThatNeverRan(t *testing.T) {
	c := shutDown(t, 1)
	r := rankRoler(c, "db-0", "echo 1", 5, 0)
	role, former, err := r.Bootstrap(t.Context(), peer.NewSet(member("db-0", 0)), fqdn("db-0"))
	if err != nil || role != "form" || former != fqdn("db-0") {
		t.Fatalf("db-0: %q former %q, %v; want form", role, former, err)
	}
}

// TestRolerJoiningARunningMemberRegisters: a member told join because
// another runs is recorded as a member, so a later cold start awaits its
// rank (it holds data of the cluster).
func TestRolerJoiningARunningMemberRegisters(t *testing.T) {
	ctx := t.Context()
	c := shutDown(t, 3)
	// db-2 is the only member left; the record lists db-0 and db-2.
	lease, err := c.CoordinationV1().Leases("ns").Get(ctx, "db-formed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := recordOf(lease)
	if err := setMembers(lease, []Member{rec.Members[0], rec.Members[2]}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	db2, err := c.CoreV1().Pods("ns").Get(ctx, "db-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db2.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := c.CoreV1().Pods("ns").Update(ctx, db2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := rankRoler(c, "db-1", "echo 5", 3, 0)
	if role, _, err := r.Bootstrap(ctx, threeMembers(), fqdn("db-1")); err != nil || role != "join" {
		t.Fatalf("db-1: %q, %v; want join (db-2 runs)", role, err)
	}
	got, err := r.Lease.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(got.Members, func(m Member) bool { return m.Pod == "db-1" && m.UID == "u1" }) {
		t.Errorf("members %+v; want db-1 (u1) registered", got.Members)
	}
}

// setConditions gives pod the Ready (false) and Initialized (true)
// conditions kubelet writes, at those times.
func setConditions(t *testing.T, c *fake.Clientset, pod string, notReadySince, initializedAt time.Time) {
	t.Helper()
	putConditions(t, c, pod,
		corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(initializedAt)},
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(notReadySince)})
}

// putConditions replaces pod's status conditions with conds.
func putConditions(t *testing.T, c *fake.Clientset, pod string, conds ...corev1.PodCondition) {
	t.Helper()
	p, err := c.CoreV1().Pods("ns").Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = conds
	if _, err := c.CoreV1().Pods("ns").Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRolerFormerAsksAgain is galera-3's stuck round: db-0 formed by
// rank, db-1 was told to join it, and db-0's node died before db-1
// finished joining. db-0's pod came back with its node (the same UID) and
// its bootstrap ran again: it withdraws its mark and forms again, in a new
// epoch, since db-1 was never Ready since it was told join. The process
// that told its role keeps it.
func TestRolerFormerAsksAgain(t *testing.T) {
	ctx := t.Context()
	c := shutDown(t, 2)
	set := peer.NewSet(member("db-0", 0), member("db-1", 1))
	first, db1 := coldStart(t, c, set)
	epoch := readRecord(t, c).Epoch
	t0 := time.Date(2026, 12, 5, 5, 28, 0, 0, time.UTC)
	setConditions(t, c, "db-1", t0, t0.Add(3*time.Second)) // never Ready since its init
	again := rankRoler(c, "db-0", "echo 5", 2, 0)
	if role, former, err := again.Bootstrap(ctx, set, fqdn("db-0")); err != nil || role != "form" || former != fqdn("db-0") {
		t.Errorf("db-0 asking again, db-1 never Ready: %q former %q, %v; want form", role, former, err)
	}
	if rec := readRecord(t, c); rec.Pod != "db-0" || rec.Epoch != epoch+1 {
		t.Errorf("record %s epoch %d; want db-0, epoch %d", rec.Pod, rec.Epoch, epoch+1)
	}
	if role, _, err := first.Bootstrap(ctx, set, fqdn("db-0")); err != nil || role != "form" {
		t.Errorf("db-0's first process on a later peer set: %q, %v; want form, kept", role, err)
	}
	if role, former, err := db1.Bootstrap(ctx, set, fqdn("db-1")); err != nil || role != "join" || former != fqdn("db-0") {
		t.Errorf("db-1's process on a later peer set: %q former %q, %v; want join db-0", role, former, err)
	}
}

// TestRolerEveryMemberAsksAgain is galera-4's stuck round 35: the cluster
// lost its primary component in place, every member had been Ready since
// it was told its role, and each was restarted in its pod. Before, the
// former was told to join a member that was told join before, and nobody
// formed. Now each member that asks again withdraws its mark and writes
// its rank; the former waits for db-1's, and the higher rank forms.
func TestRolerEveryMemberAsksAgain(t *testing.T) {
	ctx := t.Context()
	c := shutDown(t, 2)
	set := peer.NewSet(member("db-0", 0), member("db-1", 1))
	coldStart(t, c, set)
	t0 := time.Date(2026, 12, 5, 5, 28, 0, 0, time.UTC)
	setConditions(t, c, "db-1", t0.Add(time.Minute), t0.Add(3*time.Second)) // Ready, then not
	db0 := rankRoler(c, "db-0", "echo 5", 2, 0)
	if role, _, err := db0.Bootstrap(ctx, set, fqdn("db-0")); !errors.Is(err, ErrRankAwaited) || !strings.Contains(err.Error(), "not asked again: db-1") {
		t.Fatalf("db-0 asking again, db-1 was Ready since: %q, %v; want db-1's rank awaited", role, err)
	}
	db1 := rankRoler(c, "db-1", "echo 9", 2, 0)
	if role, former, err := db1.Bootstrap(ctx, set, fqdn("db-1")); err != nil || role != "form" || former != fqdn("db-1") {
		t.Fatalf("db-1 asking again with the higher rank: %q former %q, %v; want form", role, former, err)
	}
	if role, former, err := db0.Bootstrap(ctx, set, fqdn("db-0")); err != nil || role != "join" || former != fqdn("db-1") {
		t.Errorf("db-0 after the decision: %q former %q, %v; want join db-1", role, former, err)
	}
	if rec := readRecord(t, c); rec.Pod != "db-1" || rec.UID != "u1" {
		t.Errorf("record names %s (%s); want db-1 (u1)", rec.Pod, rec.UID)
	}
}

// TestRolerJoinerAsksBeforeTheFormer: every member crashed in place and
// db-1 asks again before db-0, the former, does. db-0 is not Ready, so
// db-1 does not join it (it would start and wait for a member that has
// not asked yet, and be awaited by it): it withdraws and waits for db-0's
// rank. Once db-0 asks again, the ranks decide.
func TestRolerJoinerAsksBeforeTheFormer(t *testing.T) {
	ctx := t.Context()
	c := shutDown(t, 2)
	set := peer.NewSet(member("db-0", 0), member("db-1", 1))
	coldStart(t, c, set)
	t0 := time.Date(2026, 12, 5, 5, 28, 0, 0, time.UTC)
	setConditions(t, c, "db-0", t0.Add(time.Minute), t0.Add(3*time.Second))
	setConditions(t, c, "db-1", t0.Add(time.Minute), t0.Add(3*time.Second))
	db1 := rankRoler(c, "db-1", "echo 9", 2, 0)
	for range 2 { // the withdrawal, then the wait
		if role, _, err := db1.Bootstrap(ctx, set, fqdn("db-1")); !errors.Is(err, ErrRankAwaited) || !strings.Contains(err.Error(), "not asked again: db-0") {
			t.Fatalf("db-1 asking again before db-0: %q, %v; want db-0's rank awaited", role, err)
		}
	}
	db0 := rankRoler(c, "db-0", "echo 5", 2, 0)
	if role, former, err := db0.Bootstrap(ctx, set, fqdn("db-0")); err != nil || role != "join" || former != fqdn("db-1") {
		t.Errorf("db-0 asking again: %q former %q, %v; want join db-1 (the higher rank)", role, former, err)
	}
	if role, former, err := db1.Bootstrap(ctx, set, fqdn("db-1")); err != nil || role != "form" || former != fqdn("db-1") {
		t.Errorf("db-1 after the decision: %q former %q, %v; want form", role, former, err)
	}
}

// TestRolerAskingAgainConfirmsTheRunner is TestAppGalera's every-member
// crash as it failed in CI: db-1's container restarted at once and asked
// again while db-0's pod, whose mariadbd was killed a moment before, still
// showed Ready. Before, db-1 was told join at once, started at once with
// its view of the primary component and waited for db-0, while db-0,
// asking again later, awaited db-1's rank: neither went on. Now db-1 sees
// db-0 Ready for RunningSettle before it joins it; when db-0 turns not
// Ready meanwhile, db-1 withdraws and awaits db-0's rank, and the ranks
// decide.
func TestRolerAskingAgainConfirmsTheRunner(t *testing.T) {
	ctx := t.Context()
	for _, stays := range []bool{true, false} {
		c := shutDown(t, 2)
		set := peer.NewSet(member("db-0", 0), member("db-1", 1))
		coldStart(t, c, set)
		setPodReady(t, c, "db-0", corev1.ConditionTrue)
		now := time.Date(2026, 12, 5, 13, 56, 45, 0, time.UTC)
		db1 := rankRoler(c, "db-1", "echo 5", 2, 0)
		db1.Clock = func() time.Time { return now }
		for _, after := range []time.Duration{0, 5 * time.Second} {
			now = now.Add(after)
			if role, _, err := db1.Bootstrap(ctx, set, fqdn("db-1")); !errors.Is(err, ErrRankAwaited) || !strings.Contains(err.Error(), "confirming it runs") {
				t.Fatalf("stays %v: db-1 asking again, db-0 Ready for %s: %q, %v; want confirming db-0 runs", stays, after, role, err)
			}
		}
		if stays {
			now = now.Add(5 * time.Second)
			if role, former, err := db1.Bootstrap(ctx, set, fqdn("db-1")); err != nil || role != "join" || former != fqdn("db-0") {
				t.Errorf("db-1, db-0 Ready for 10s: %q former %q, %v; want join db-0", role, former, err)
			}
			continue
		}
		setPodReady(t, c, "db-0", corev1.ConditionFalse)
		for range 2 { // the withdrawal, then the wait
			if role, _, err := db1.Bootstrap(ctx, set, fqdn("db-1")); !errors.Is(err, ErrRankAwaited) || !strings.Contains(err.Error(), "not asked again: db-0") {
				t.Fatalf("db-1, db-0 not Ready any more: %q, %v; want db-0's rank awaited", role, err)
			}
		}
		db0 := rankRoler(c, "db-0", "echo 5", 2, 0)
		if role, former, err := db0.Bootstrap(ctx, set, fqdn("db-0")); err != nil || role != "form" || former != fqdn("db-0") {
			t.Errorf("db-0 asking again: %q former %q, %v; want form (the same rank, the lower ordinal)", role, former, err)
		}
		if role, former, err := db1.Bootstrap(ctx, set, fqdn("db-1")); err != nil || role != "join" || former != fqdn("db-0") {
			t.Errorf("db-1 after the decision: %q former %q, %v; want join db-0", role, former, err)
		}
	}
}

// setPodReady sets pod's Ready condition to st.
func setPodReady(t *testing.T, c *fake.Clientset, pod string, st corev1.ConditionStatus) {
	t.Helper()
	putConditions(t, c, pod, corev1.PodCondition{Type: corev1.PodReady, Status: st})
}

// coldStart runs the cold start of shutDown's db-0 and db-1: db-0 has the
// higher rank and forms, db-1 joins. It returns their Rolers.
func coldStart(t *testing.T, c *fake.Clientset, set peer.Set) (db0, db1 *Roler) {
	t.Helper()
	ctx := t.Context()
	db0 = rankRoler(c, "db-0", "echo 5", 2, 0)
	db1 = rankRoler(c, "db-1", "echo -1", 2, 0)
	for _, r := range []*Roler{db0, db1, db0} {
		_, _, _ = r.Bootstrap(ctx, set, fqdn(r.Pod))
	}
	if role, _, err := db0.Bootstrap(ctx, set, fqdn("db-0")); err != nil || role != "form" {
		t.Fatalf("db-0 at the cold start: %q, %v; want form", role, err)
	}
	if role, _, err := db1.Bootstrap(ctx, set, fqdn("db-1")); err != nil || role != "join" {
		t.Fatalf("db-1 at the cold start: %q, %v; want join", role, err)
	}
	return db0, db1
}

func readRecord(t *testing.T, c *fake.Clientset) *Record {
	t.Helper()
	rec, err := (&Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}).Read(t.Context())
	if err != nil || rec == nil {
		t.Fatalf("read the record: %v, %v", rec, err)
	}
	return rec
}

func TestPodStateWasReady(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 5, 28, 0, 0, time.UTC)
	cond := func(typ corev1.PodConditionType, st corev1.ConditionStatus, at time.Time) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: st, LastTransitionTime: metav1.NewTime(at)}
	}
	for _, tc := range []struct {
		name            string
		conds           []corev1.PodCondition
		ready, wasReady bool
	}{
		{name: "Ready", conds: []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue, t0), cond(corev1.PodReady, corev1.ConditionTrue, t0.Add(time.Second))}, ready: true, wasReady: true},
		{name: "not Ready since before its init", conds: []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue, t0), cond(corev1.PodReady, corev1.ConditionFalse, t0.Add(-time.Second))}},
		{name: "not Ready since its init, the same second", conds: []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue, t0), cond(corev1.PodReady, corev1.ConditionFalse, t0)}},
		{name: "not Ready since after its init", conds: []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue, t0), cond(corev1.PodReady, corev1.ConditionFalse, t0.Add(time.Minute))}, wasReady: true},
		{name: "initializing: unknown", conds: []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionFalse, t0), cond(corev1.PodReady, corev1.ConditionFalse, t0.Add(-time.Second))}, wasReady: true},
		{name: "no conditions: unknown", wasReady: true},
	} {
		st := podState(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}, Status: corev1.PodStatus{Conditions: tc.conds}})
		if st.UID != "u" || st.Ready != tc.ready || st.WasReady != tc.wasReady {
			t.Errorf("%s: %+v; want Ready %v, WasReady %v", tc.name, st, tc.ready, tc.wasReady)
		}
	}
}
