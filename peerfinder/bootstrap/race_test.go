package bootstrap

import (
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/peerfinder/peer"
)

// These tests lose the claim race on purpose: a reactor lets "another
// member" write the Lease between our read and our write, exactly as the
// API server orders two concurrent claims.

var leases = coordinationv1.Resource("leases")

func formedLease(pod, uid string) *coordinationv1.Lease {
	holder := pod
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "db-formed", Namespace: "ns", Annotations: map[string]string{AnnotationUID: uid}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

// loseCreate makes the first create of the Lease fail with AlreadyExists
// after the winner's Lease was stored.
func loseCreate(t *testing.T, c *fake.Clientset, winner *coordinationv1.Lease) *atomic.Int32 {
	var creates atomic.Int32
	c.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) > 1 {
			return false, nil, nil
		}
		if err := c.Tracker().Add(winner); err != nil {
			t.Errorf("store the winner's lease: %v", err)
		}
		return true, nil, apierrors.NewAlreadyExists(leases, winner.Name)
	})
	return &creates
}

// loseUpdate makes the first update of the Lease fail with Conflict after
// the winner's record was stored over the empty Lease.
func loseUpdate(t *testing.T, c *fake.Clientset, winner *coordinationv1.Lease) *atomic.Int32 {
	var updates atomic.Int32
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if updates.Add(1) > 1 {
			return false, nil, nil
		}
		if err := c.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), winner, winner.Namespace); err != nil {
			t.Errorf("store the winner's record: %v", err)
		}
		return true, nil, apierrors.NewConflict(leases, winner.Name, nil)
	})
	return &updates
}

func TestClaimLostOnCreateReturnsTheWinnersRecord(t *testing.T) {
	c := fake.NewClientset()
	creates := loseCreate(t, c, formedLease("db-1", "u1"))
	l := &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}
	got, err := l.Claim(t.Context(), Record{Pod: "db-0", UID: "u0"}, fqdn("db-0"))
	if err != nil {
		t.Fatalf("Claim() = %v", err)
	}
	if former(got) != (formed{Pod: "db-1", UID: "u1"}) {
		t.Errorf("Claim() after losing the create = %+v, want the winner's record", *got)
	}
	if n := creates.Load(); n != 1 {
		t.Errorf("%d creates, want 1 (the lost one)", n)
	}
	if rec, err := l.Read(t.Context()); err != nil || former(rec) != (formed{Pod: "db-1", UID: "u1"}) {
		t.Errorf("lease holds %+v (%v), want the winner's record kept", rec, err)
	}
}

func TestClaimLostOnUpdateReturnsTheWinnersRecord(t *testing.T) {
	empty := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "db-formed", Namespace: "ns"}}
	c := fake.NewClientset(empty)
	updates := loseUpdate(t, c, formedLease("db-1", "u1"))
	l := &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}
	got, err := l.Claim(t.Context(), Record{Pod: "db-0", UID: "u0"}, fqdn("db-0"))
	if err != nil {
		t.Fatalf("Claim() = %v", err)
	}
	if former(got) != (formed{Pod: "db-1", UID: "u1"}) {
		t.Errorf("Claim() after losing the update = %+v, want the winner's record", *got)
	}
	if n := updates.Load(); n != 1 {
		t.Errorf("%d updates, want 1 (the lost one)", n)
	}
	if rec, err := l.Read(t.Context()); err != nil || former(rec) != (formed{Pod: "db-1", UID: "u1"}) {
		t.Errorf("lease holds %+v (%v), want the winner's record kept", rec, err)
	}
}

// TestRolerAfterALostClaimJoins covers both ways of losing: members
// without an ordinal (elected by the Lease) and a pod-0 racing a
// re-created pod-0 of the same name. The loser decides again with the
// winner's record and is told join.
func TestRolerAfterALostClaimJoins(t *testing.T) {
	noOrdinal := func(name string) peer.Peer { return member(name, -1) }
	tests := []struct {
		name   string
		set    peer.Set
		self   string
		winner *coordinationv1.Lease
		lose   func(*testing.T, *fake.Clientset, *coordinationv1.Lease) *atomic.Int32
		empty  bool // the Lease exists but names nobody
	}{
		{name: "no ordinal, lost the create", set: peer.NewSet(noOrdinal("api-a"), noOrdinal("api-b")), self: "api-a",
			winner: formedLease("api-b", "ub"), lose: loseCreate},
		{name: "no ordinal, lost the update", set: peer.NewSet(noOrdinal("api-a"), noOrdinal("api-b")), self: "api-a",
			winner: formedLease("api-b", "ub"), lose: loseUpdate, empty: true},
		{name: "first ordinal, lost the create to another pod of the same name", set: peer.NewSet(member("db-0", 0), member("db-1", 1)), self: "db-0",
			winner: formedLease("db-0", "u0-other"), lose: loseCreate},
		{name: "first ordinal, lost the update", set: peer.NewSet(member("db-0", 0)), self: "db-0",
			winner: formedLease("db-0", "u0-other"), lose: loseUpdate, empty: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset()
			if tt.empty {
				c = fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "db-formed", Namespace: "ns"}})
			}
			lost := tt.lose(t, c, tt.winner)
			r := &Roler{Lease: &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}, Pod: tt.self, UID: "u-self"}
			got, err := r.Role(t.Context(), tt.set, fqdn(tt.self))
			if err != nil || got != string(Join) {
				t.Fatalf("Role() after a lost claim = %q, %v; want join", got, err)
			}
			if lost.Load() != 1 {
				t.Fatalf("the claim was not lost (%d writes): the test did not race", lost.Load())
			}
			if r.last.Reason != RecordedOther {
				t.Errorf("reason %s, want %s", r.last.Reason, RecordedOther)
			}
			// Asked again (the next peer set), it still joins and writes nothing.
			if got, err := r.Role(t.Context(), tt.set, fqdn(tt.self)); err != nil || got != string(Join) {
				t.Errorf("second Role() = %q, %v; want join", got, err)
			}
			if rec, err := r.Lease.Read(t.Context()); err != nil || rec.UID != tt.winner.Annotations[AnnotationUID] {
				t.Errorf("lease holds %+v (%v), want the winner's", rec, err)
			}
		})
	}
}
