package controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
)

// inClusterNamespacePath holds the pod's namespace, the default namespace of
// the leader election Lease.
const inClusterNamespacePath = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// LeaderCheck returns nil only while identity holds the Lease ns/name: the
// Lease names it as holder and its last renewal is less than its duration
// ago. It reads the Lease from the API server each time. The reconciler runs
// it right before each destructive step (deleting a pod, a claim or a
// StatefulSet; rebinding a volume), so a leader that was paused past its
// lease, and resumes in the middle of a reconcile while another replica
// leads, stops there instead of acting. What remains: a pause between the
// check and the request it guards; client-go offers no fencing token the API
// server would check.
func LeaderCheck(leases coordinationv1client.LeasesGetter, ns, name, identity string, now func() time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		l, err := leases.Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("check leadership: get lease %s/%s: %w", ns, name, err)
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		if holder != identity {
			return fmt.Errorf("not the leader: lease %s/%s is held by %q", ns, name, holder)
		}
		d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
		if l.Spec.RenewTime == nil || !now().Before(l.Spec.RenewTime.Add(d)) {
			return fmt.Errorf("not the leader: lease %s/%s expired (renewed %v, duration %s)", ns, name, l.Spec.RenewTime, d)
		}
		return nil
	}
}

// leaderNamespace is the Lease's namespace: the given one, else the pod's.
func leaderNamespace(ns string) (string, error) {
	if ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(inClusterNamespacePath)
	if err != nil {
		return "", fmt.Errorf("leader election namespace: not running in a cluster, set it: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// leaderIdentity is a unique holder identity: hostname and a random suffix,
// as controller-runtime makes it.
func leaderIdentity(suffix string) (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader identity: %w", err)
	}
	return h + "_" + suffix, nil
}
