package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/internal/testing/await"
)

func TestOwnPodRetriesUntilThePodExists(t *testing.T) {
	c := fake.NewClientset()
	failures := make(chan error, 100)
	got := make(chan *corev1.Pod, 1)
	go func() {
		p, err := OwnPod(t.Context(), c.CoreV1().Pods("ns"), "db-0", retry.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond},
			func(err error, _ time.Duration) { failures <- err })
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	await.Recv(t, failures, "a failed get while the pod does not exist")
	if _, err := c.CoreV1().Pods("ns").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := await.Recv(t, got, "OwnPod to return the pod"); p == nil || p.Name != "db-0" {
		t.Errorf("OwnPod = %v", p)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := OwnPod(ctx, c.CoreV1().Pods("ns"), "absent", retry.Backoff{}, nil); err == nil {
		t.Error("OwnPod with an ended context: nil error")
	}
}
