package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/retry"
)

// PodGetter reads a pod by name; client-go's CoreV1().Pods(namespace) is one.
type PodGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
}

// OwnPod reads this process's own pod, retrying failures with b until it
// succeeds or ctx ends (then it returns ctx.Err()). onErr, when not nil,
// sees each failure and the pause before the next try, to report it (a
// Reporter's Failed) or log it once. It is the one "get my own pod, with
// retry" of peer-finder.
func OwnPod(ctx context.Context, pods PodGetter, name string, b retry.Backoff, onErr func(err error, retryIn time.Duration)) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := retry.Do(ctx, b, func(ctx context.Context) error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		pod = p
		return err
	}, onErr)
	if err != nil {
		return nil, err
	}
	return pod, nil
}
