package bootstrap

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/internal/ordinal"
)

// TestExpectedOrderedReadyInitMode: an OrderedReady StatefulSet creates pod
// i only once pods below it are Ready, and a pod waiting in its init
// container is not Ready; so in init mode member i waits for i+1 members
// (found on the real node: every OrderedReady etcd round was stuck with
// etcd-0 waiting for 3 of 3 and etcd-1 never created).
func TestExpectedOrderedReadyInitMode(t *testing.T) {
	ss := func(policy appsv1.PodManagementPolicyType, replicas int32, start int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), PodManagementPolicy: policy}}
		if start > 0 {
			s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: start}
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		ss       *appsv1.StatefulSet
		ordinal  int
		initMode bool
		want     int
	}{
		{"ordered init ordinal 0", ss(appsv1.OrderedReadyPodManagement, 3, 0), 0, true, 1},
		{"ordered init ordinal 1", ss(appsv1.OrderedReadyPodManagement, 3, 0), 1, true, 2},
		{"ordered init last", ss(appsv1.OrderedReadyPodManagement, 3, 0), 2, true, 3},
		{"ordered init beyond replicas (scaled down)", ss(appsv1.OrderedReadyPodManagement, 3, 0), 4, true, 3},
		{"default policy is ordered", ss("", 3, 0), 0, true, 1},
		{"ordered init with a start ordinal", ss(appsv1.OrderedReadyPodManagement, 3, 5), 6, true, 2},
		{"ordered sidecar waits for all", ss(appsv1.OrderedReadyPodManagement, 3, 0), 0, false, 3},
		{"parallel init waits for all", ss(appsv1.ParallelPodManagement, 3, 0), 0, true, 3},
		{"ordinal unknown", ss(appsv1.OrderedReadyPodManagement, 3, 0), -1, true, 3},
		{"replicas unset", &appsv1.StatefulSet{}, 0, true, 1},
	} {
		if got := Expected(tc.ss, tc.ordinal, tc.initMode); got != tc.want {
			t.Errorf("%s: Expected = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPodOrdinal(t *testing.T) {
	for _, tc := range []struct {
		meta metav1.ObjectMeta
		want int
	}{
		{metav1.ObjectMeta{Name: "etcd-2"}, 2},
		{metav1.ObjectMeta{Name: "etcd-2", Labels: map[string]string{appsv1.PodIndexLabel: "7"}}, 7},
		{metav1.ObjectMeta{Name: "other-2"}, -1},
		{metav1.ObjectMeta{Name: "etcd-x"}, -1},
	} {
		if got := ordinal.Of(tc.meta.Name, tc.meta.Labels, "etcd"); got != tc.want {
			t.Errorf("ordinal.Of(%+v) = %d, want %d", tc.meta, got, tc.want)
		}
	}
}
