package peerfinder

import (
	"encoding/json"
	"errors"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/peerfinder/bootstrap"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
)

// TestRoleRankAwaitedIsPending: while other members' ranks are awaited the
// engine gets a pending result (re-checked every sink.PendingInterval, no
// backoff, no warning), not a failure.
func TestRoleRankAwaitedIsPending(t *testing.T) {
	members, err := json.Marshal([]bootstrap.Member{{Pod: "db-0", UID: "old-0", Claims: []bootstrap.Claim{{Name: "data-db-0", UID: "c0"}}},
		{Pod: "db-1", UID: "old-1", Claims: []bootstrap.Claim{{Name: "data-db-1", UID: "c1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	holder := "db-0"
	c := fake.NewClientset(
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0", Namespace: "ns", UID: "c0"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "ns", UID: "u0"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "db-formed", Namespace: "ns",
			Annotations: map[string]string{bootstrap.AnnotationUID: "old-0", bootstrap.AnnotationMembers: string(members)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}},
	)
	b := &bootstrapParts{roler: &bootstrap.Roler{
		Lease: &bootstrap.Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"},
		Data:  &bootstrap.Data{Client: clientset.Wrap(c), Namespace: "ns"}, Pod: "db-0",
		Rank: bootstrap.RankCommand([]string{"echo", "7"}), Size: func() int { return 2 },
	}}
	self := "db-0.db.ns.svc.cluster.local"
	_, _, err = b.role(t.Context(), peer.NewSet(peer.Peer{FQDN: self, Name: "db-0", Ordinal: 0}), self)
	if !sink.IsPending(err) || !errors.Is(err, bootstrap.ErrNoRole) {
		t.Fatalf("role while db-1's rank is awaited: %v; want a pending result", err)
	}
}
