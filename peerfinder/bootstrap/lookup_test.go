package bootstrap

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/internal/kube/clientset"
)

// TestReplicasLookup covers diagnose mode's one-shot read: the owner's
// name, spec.replicas (1 when unset, as the API defaults it) and the first
// ordinal, and the errors that say what is missing.
func TestReplicasLookup(t *testing.T) {
	db := statefulSet("db", 3)
	db.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 2}
	unset := statefulSet("unset", 0)
	unset.UID = "unset-uid"
	unset.Spec.Replicas = nil
	gone := statefulSet("gone", 1)
	gone.UID = "gone-uid"
	c := fake.NewClientset(db, unset, statefulSet("other", 7),
		ownedPod("db-2", db), ownedPod("unset-0", unset), ownedPod("gone-0", gone), ownedPod("api-7d9f", nil))

	for _, tt := range []struct {
		pod          string
		name         string
		replicas     int
		first        int
		wantErr      string
		wantNoOwner  bool
		wantNameOnly bool
	}{
		{pod: "db-2", name: "db", replicas: 3, first: 2},
		{pod: "unset-0", name: "unset", replicas: 1},
		{pod: "gone-0", name: "gone", wantErr: "statefulset ns/gone not found", wantNameOnly: true},
		{pod: "api-7d9f", wantNoOwner: true},
		{pod: "missing", wantErr: "get pod ns/missing"},
	} {
		t.Run(tt.pod, func(t *testing.T) {
			r := &Replicas{Client: clientset.Wrap(c), Namespace: "ns", Pod: tt.pod}
			name, replicas, first, err := r.Lookup(t.Context())
			switch {
			case tt.wantNoOwner:
				if !errors.Is(err, ErrNoStatefulSet) {
					t.Fatalf("Lookup() err = %v, want ErrNoStatefulSet", err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Lookup() err = %v, want %q", err, tt.wantErr)
				}
				if tt.wantNameOnly && (name != tt.name || replicas != 0) {
					t.Errorf("Lookup() = %q, %d with the error; want the owner's name and no size", name, replicas)
				}
			default:
				if err != nil || name != tt.name || replicas != tt.replicas || first != tt.first {
					t.Fatalf("Lookup() = %q, %d, %d, %v; want %q, %d, %d", name, replicas, first, err, tt.name, tt.replicas, tt.first)
				}
			}
		})
	}
}
