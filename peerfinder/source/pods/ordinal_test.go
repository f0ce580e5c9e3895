package pods

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flockd/flock/peerfinder/bootstrap"
	"github.com/flockd/flock/peerfinder/peer"
)

func ownedBy(kind, name string) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: appsv1.SchemeGroupVersion.String(), Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &yes,
		}}
	}
}

// On clusters without the apps.kubernetes.io/pod-index label (before
// Kubernetes 1.28, or with the feature off) a StatefulSet's pods still have
// ordinals by the StatefulSet naming rule; with ordinal -1 and no Lease
// every member was told join and nobody formed the cluster (issue 12 #3).
func TestOrdinalWithoutPodIndexLabel(t *testing.T) {
	var ps []*corev1.Pod
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		ps = append(ps, pod(name, "10.0.0.1", ownedBy("StatefulSet", "web")))
	}
	deploy := pod("web-5", "10.0.0.9", ownedBy("ReplicaSet", "web"))
	got := Peers(slims(t, append(ps, deploy)...), opts)
	want := map[string]int{"web-0": 0, "web-1": 1, "web-2": 2, "web-5": -1}
	for _, p := range got {
		if p.Ordinal != want[p.Name] {
			t.Errorf("%s: ordinal %d, want %d", p.Name, p.Ordinal, want[p.Name])
		}
	}
	set := peer.NewSet(got[:3]...)
	forms := 0
	for _, p := range set.Peers() {
		d := bootstrap.Decide(bootstrap.Input{Self: p.FQDN, Set: set})
		if d.Role == bootstrap.Form {
			forms++
			if p.Name != "web-0" {
				t.Errorf("%s forms (%s), want web-0 to", p.Name, d.Reason)
			}
		}
	}
	if forms != 1 {
		t.Errorf("%d members form, want exactly one (web-0)", forms)
	}
}
