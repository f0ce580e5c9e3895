package realnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/localcluster/clustertest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The controller as users install it: config/default (CRD, RBAC, the
// flock-system namespace, a Deployment of two replicas with leader
// election, probes and HTTPS metrics).
const (
	controllerNS    = "flock-system"
	controllerLease = "flock-controller.flockd.io"
)

// flockController installs flock-controller as README tells users,
// kustomize's config/default, with its image from "make images", and waits
// until both replicas are Ready. The bed makes two changes: the pods select
// and tolerate the real nodes (forRealNode), and the controller watches
// only the test's namespace (-namespace), because other packages' tests run
// controllers of their own on this cluster at the same time. When the test
// ends the Deployment is deleted; the CRD, RBAC and namespace stay for the
// next test (applied again, server-side, they are unchanged).
func (b *bed) flockController() {
	b.t.Helper()
	// Namespaces and CRDs first, as kubectl orders what it applies.
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), repoPath(b.t, "config/default"))
	if err != nil {
		b.t.Fatalf("kustomize config/default: %v", err)
	}
	rendered, err := m.AsYaml()
	if err != nil {
		b.t.Fatal(err)
	}
	b.applyServerSide(rendered, func(o *unstructured.Unstructured) {
		if o.GetKind() != "Deployment" {
			return
		}
		b.forRealNode(o)
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		args, _, _ := unstructured.NestedStringSlice(c, "args")
		_ = unstructured.SetNestedStringSlice(c, append(args, "-namespace="+b.ns), "args")
		_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	})
	b.t.Cleanup(func() {
		ctx := context.Background()
		_ = b.Client.AppsV1().Deployments(controllerNS).Delete(ctx, "flock-controller", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
		b.WaitFor(b.t, "flock-controller's pods gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := b.Client.CoreV1().Pods(controllerNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=flock-controller"})
			return err == nil && len(l.Items) == 0, nil
		})
	})
	b.controllerPods(2)
	b.WaitFor(b.t, "Flock CRD served", time.Minute, func(ctx context.Context) (bool, error) {
		dc, err := dynamic.NewForConfig(b.Config)
		if err != nil {
			return false, err
		}
		_, err = dc.Resource(flocksGVR).Namespace(b.ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	b.leader()
}

// controllerPods waits until n controller pods run and are Ready (their
// readiness probe passes) and returns them.
func (b *bed) controllerPods(n int) []corev1.Pod {
	b.t.Helper()
	var ready []corev1.Pod
	b.WaitFor(b.t, fmt.Sprintf("%d flock-controller pods Ready", n), 3*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := b.Client.CoreV1().Pods(controllerNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=flock-controller"})
		if err != nil {
			return false, err
		}
		ready = ready[:0]
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && clustertest.PodReady(&p) {
				ready = append(ready, p)
			}
		}
		return len(ready) == n, nil
	})
	return ready
}

// leader is the pod holding the controller's leader election Lease.
func (b *bed) leader() *corev1.Pod {
	b.t.Helper()
	var leader *corev1.Pod
	b.WaitFor(b.t, "a flock-controller leader", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := b.Client.CoordinationV1().Leases(controllerNS).Get(ctx, controllerLease, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		name, _, _ := strings.Cut(ptr.Deref(l.Spec.HolderIdentity, ""), "_")
		p, err := b.Client.CoreV1().Pods(controllerNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			return false, nil
		}
		leader = p
		return true, nil
	})
	return leader
}

// applyServerSide applies every object of a multi-document manifest with
// server-side apply (so applying it again is a no-op), after edit.
func (b *bed) applyServerSide(manifest []byte, edit func(*unstructured.Unstructured)) {
	b.t.Helper()
	b.eachObject(manifest, edit, func(ri dynamic.ResourceInterface, obj *unstructured.Unstructured) {
		body, err := obj.MarshalJSON()
		if err != nil {
			b.t.Fatal(err)
		}
		if _, err := ri.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "flock-tests", Force: ptr.To(true)}); err != nil {
			b.t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	})
}

// TestControllerAsShipped: config/default on the real nodes runs two
// replicas that pass their liveness and readiness probes, one of them the
// leader; the metrics are served over HTTPS to a token allowed to read them
// (and refused without one); and when the leader's pod is deleted the other
// replica takes over within the Lease's duration while a Flock keeps
// reconciling.
func TestControllerAsShipped(t *testing.T) {
	b := newBed(t)
	b.flockController()
	ctx := context.Background()
	pods := b.controllerPods(2)
	leader := b.leader()

	// HTTPS metrics: a ServiceAccount bound to flock-metrics-reader (as
	// config/rbac/metrics_reader_role.yaml says) gets them, no token does not.
	token := b.MetricsToken(t, b.ns, "flock-metrics-reader")
	metricsAddr := net.JoinHostPort(leader.Status.PodIP, "8443")
	b.WaitFor(t, "the leader's metrics over HTTPS with the scraper's token", time.Minute, func(ctx context.Context) (bool, error) {
		code, body, err := clustertest.GetMetrics(ctx, metricsAddr, token)
		return err == nil && code == http.StatusOK && strings.Contains(body, "controller_runtime_reconcile_total"), nil
	})
	if code, _, err := clustertest.GetMetrics(ctx, metricsAddr, ""); err != nil || code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("metrics without a token: %d, %v; want 401 or 403", code, err)
	}

	// A Flock the controller reconciles: on the simulated nodes (its
	// members need no real container), NetworkStorage mode.
	flock := []byte(`apiVersion: flockd.io/v1alpha1
kind: Flock
metadata:
  name: web
spec:
  replicas: 2
  mode: NetworkStorage
  template:
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`)
	b.apply(flock, nil)
	waitReplicas := func(n int32) {
		t.Helper()
		b.WaitFor(t, fmt.Sprintf("StatefulSet web at %d replicas", n), 2*time.Minute, func(ctx context.Context) (bool, error) {
			s, err := b.Client.AppsV1().StatefulSets(b.ns).Get(ctx, "web", metav1.GetOptions{})
			return err == nil && ptr.Deref(s.Spec.Replicas, 0) == n, nil
		})
	}
	waitReplicas(2)

	// The leader's pod deleted: the other replica leads within the Lease's
	// duration (15 s, controller-runtime's default, which config/default
	// keeps), and the Flock keeps being reconciled.
	deleted := time.Now()
	if err := b.Client.CoreV1().Pods(controllerNS).Delete(ctx, leader.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var next *corev1.Pod
	b.WaitFor(t, "a new leader", 45*time.Second, func(ctx context.Context) (bool, error) {
		l, err := b.Client.CoordinationV1().Leases(controllerNS).Get(ctx, controllerLease, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		name, _, _ := strings.Cut(ptr.Deref(l.Spec.HolderIdentity, ""), "_")
		if name == "" || name == leader.Name {
			return false, nil
		}
		p, err := b.Client.CoreV1().Pods(controllerNS).Get(ctx, name, metav1.GetOptions{})
		next = p
		return err == nil, nil
	})
	t.Logf("leader %s deleted; %s leads after %s", leader.Name, next.Name, time.Since(deleted).Round(time.Second))
	if next.Name != pods[0].Name && next.Name != pods[1].Name {
		t.Logf("the new leader %s is the replacement pod, not the standby (replicas were %s, %s)", next.Name, pods[0].Name, pods[1].Name)
	}
	b.scaleFlock("web", 3)
	waitReplicas(3)
	// The Deployment replaces the deleted pod: two Ready replicas again.
	for _, p := range b.controllerPods(2) {
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount > 0 {
				t.Errorf("controller pod %s restarted %d times (liveness probe?)", p.Name, s.RestartCount)
			}
		}
	}
}
