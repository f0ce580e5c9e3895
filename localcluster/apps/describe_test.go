package apps

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDescribe(t *testing.T) {
	at := time.Date(2026, 12, 5, 18, 15, 24, 0, time.UTC)
	ts := func(ago time.Duration) metav1.Time { return metav1.NewTime(at.Add(-ago)) }
	three := int32(5)
	sets := []appsv1.StatefulSet{{
		ObjectMeta: metav1.ObjectMeta{Name: "redis", Generation: 2},
		Spec:       appsv1.StatefulSetSpec{Replicas: &three, PodManagementPolicy: appsv1.OrderedReadyPodManagement},
		Status:     appsv1.StatefulSetStatus{Replicas: 4, ReadyReplicas: 3, ObservedGeneration: 2},
	}}
	pods := []corev1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "redis-4", UID: "u4", CreationTimestamp: ts(2 * time.Minute)},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/4 nodes are available", LastTransitionTime: ts(2 * time.Minute),
			}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "redis-3", UID: "u3", CreationTimestamp: ts(3 * time.Minute)},
			Spec:       corev1.PodSpec{NodeName: "real-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.4",
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: ts(90 * time.Second)}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "redis", RestartCount: 2, State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}},
			},
		},
	}
	events := []corev1.Event{
		{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "redis-4"}, Type: "Warning", Reason: "FailedScheduling", Message: "0/4 nodes", Count: 3, LastTimestamp: ts(time.Minute)},
		{InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Name: "redis"}, Type: "Normal", Reason: "SuccessfulCreate", Message: "create Pod redis-4", LastTimestamp: ts(2 * time.Minute)},
	}
	got := Describe(sets, pods, events, at)
	for _, want := range []string{
		"statefulset redis: spec.replicas 5, policy OrderedReady; status replicas 4, ready 3",
		`pod redis-3 (uid u3): node "real-1", phase Running, ip "10.0.0.4", created 3m0s ago`,
		"condition Ready=False since 1m30s ago",
		"container redis: ready false, restarts 2, waiting: CrashLoopBackOff",
		`pod redis-4 (uid u4): node "", phase Pending`,
		"condition PodScheduled=False since 2m0s ago: Unschedulable 0/4 nodes are available",
		"event 18:13:24 Normal StatefulSet/redis x1: SuccessfulCreate create Pod redis-4\nevent 18:14:24 Warning Pod/redis-4 x3: FailedScheduling 0/4 nodes",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "pod redis-3") > strings.Index(got, "pod redis-4") {
		t.Errorf("pods are not in name order:\n%s", got)
	}
}
