package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/peerfinder/events"
)

// forRealNode is the only change the tests make to an example: its pods
// select and tolerate the real node (a user's cluster has no such taint),
// and RoleBinding subjects name the test's namespace (the examples say to
// change "default" to yours).
func (b *bed) forRealNode(o *unstructured.Unstructured) {
	switch o.GetKind() {
	case "RoleBinding":
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			s.(map[string]any)["namespace"] = b.ns
		}
		_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
	case "StatefulSet", "Job", "Deployment", "Flock":
		spec, ok, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if !ok {
			b.t.Fatalf("%s %s has no pod template", o.GetKind(), o.GetName())
		}
		sel, _, _ := unstructured.NestedStringMap(spec, "nodeSelector")
		if sel == nil {
			sel = map[string]string{}
		}
		sel[localcluster.RealNodeLabel] = "true"
		_ = unstructured.SetNestedStringMap(spec, sel, "nodeSelector")
		tol, _, _ := unstructured.NestedSlice(spec, "tolerations")
		tol = append(tol, map[string]any{"key": localcluster.RealNodeLabel, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
		_ = unstructured.SetNestedSlice(spec, tol, "tolerations")
		_ = unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec")
	}
}

// TestExampleBootstrap runs examples/bootstrap as written (with its RBAC):
// three members wait for each other (-expect=auto), db-0 forms, db-1 and
// db-2 join, the Lease records the formation, and each member's volume (from
// the default StorageClass) keeps what on-start wrote.
func TestExampleBootstrap(t *testing.T) {
	b := newBed(t)
	for _, f := range []string{"serviceaccount.yaml", "endpointslice.yaml", "expect-auto.yaml", "cluster-lease.yaml"} {
		b.apply(repoFile(t, "examples/rbac/"+f), b.forRealNode)
	}
	b.apply(repoFile(t, "examples/bootstrap/statefulset.yaml"), b.forRealNode)
	for pod, want := range map[string]string{"db-0": "form by " + b.fqdn("db-0", "db"), "db-1": "join by", "db-2": "join by"} {
		log := b.waitLog(pod, "db", "by ", 3*time.Minute)
		if !strings.Contains(log, want) {
			t.Errorf("%s: volume says %q, want %q", pod, strings.TrimSpace(log), want)
		}
	}
	for _, pod := range []string{"db-1", "db-2"} {
		if log := b.logs(pod, "peer-finder", false); !strings.Contains(log, "joining the cluster of: "+b.fqdn("db-0", "db")) {
			t.Errorf("%s on-start did not join with the peer list:\n%s", pod, log)
		}
	}
	lease, err := b.Client.CoordinationV1().Leases(b.ns).Get(context.Background(), "db-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cluster Lease: %v", err)
	}
	if h := holder(lease); !strings.Contains(h, "db-0") {
		t.Errorf("cluster Lease names %q, want db-0", h)
	}
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestExampleBatchJob runs examples/hostsfile/batch-job.yaml as written:
// every trainer of the two-role job starts only when its /etc/hosts has
// ps-0 and worker-0..2, each with the address of that pod.
func TestExampleBatchJob(t *testing.T) {
	b := newBed(t)
	b.apply(repoFile(t, "examples/hostsfile/batch-job.yaml"), b.forRealNode)
	pods := b.waitRunning("app=train", "trainer", 4)
	b.waitDeliveredEvent(pods[0].Name)
	ips := map[string]string{}
	for _, p := range pods {
		role, idx := p.Labels["role"], p.Annotations["batch.kubernetes.io/job-completion-index"]
		ips[role+"-"+idx] = p.Status.PodIP
	}
	// The trainer waits until its names resolve (the kubelet rewrites
	// /etc/hosts when it starts), then prints them.
	for _, p := range pods {
		log := b.waitLog(p.Name, "trainer", "worker-", 2*time.Minute)
		for name, ip := range ips {
			if !strings.Contains(log, ip+"\t"+name) && !strings.Contains(log, ip+" "+name) {
				t.Errorf("%s's trainer runs without %s (%s) in /etc/hosts:\n%s", p.Name, name, ip, log)
			}
		}
	}
}

// TestExamplePid1 runs examples/hostsfile/pid1.yaml as written: peer-finder
// is pid 1 of the app's container and starts the server after the first
// write; a scale-up reaches the running server as SIGHUP.
func TestExamplePid1(t *testing.T) {
	b := newBed(t)
	b.apply(repoFile(t, "examples/hostsfile/pid1.yaml"), b.forRealNode)
	for _, pod := range []string{"cache-0", "cache-1", "cache-2"} {
		b.waitLog(pod, "cache", "reload: 3 peers", 3*time.Minute)
	}
	b.waitDeliveredEvent("cache-0")
	b.scale("cache", 4)
	b.waitLog("cache-0", "cache", "reload: 4 peers", 2*time.Minute)
}

// waitDeliveredEvent waits until peer-finder posted its PeersDelivered
// Event on pod, which the example's RBAC must allow (without it the
// examples ran with a "cannot post events" warning and no Events).
func (b *bed) waitDeliveredEvent(pod string) {
	b.t.Helper()
	b.WaitFor(b.t, "a PeersDelivered Event from peer-finder on "+pod, time.Minute, func(ctx context.Context) (bool, error) {
		l, err := b.Client.EventsV1().Events(b.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if e.ReportingController == events.Controller && e.Reason == "PeersDelivered" &&
				e.Regarding.Kind == "Pod" && e.Regarding.Name == pod {
				return true, nil
			}
		}
		return false, nil
	})
}
