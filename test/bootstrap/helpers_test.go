// Package bootstrap tests peer-finder's bootstrap safety against the real
// local cluster: -expect=auto following a StatefulSet, -bootstrap-timeout,
// the form/join role with a cluster Lease when pod-0 loses its data, and the
// example RBAC manifests with a real API server's authorizer. peer-finder
// runs in-process through peerfinder.Main with its real sources, and hooks
// are real child processes.
package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flockd/flock/internal/config"
	"github.com/flockd/flock/internal/peerfinder"
	"github.com/flockd/flock/internal/testing/cluster"
	"github.com/flockd/flock/internal/testing/syncbuf"
)

const wait = 90 * time.Second // bounds a hang; not a performance assertion

// service creates the headless service "web" selecting app=web.
func service(t *testing.T, c kubernetes.Interface, ns string, publishNotReady bool) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{"app": "web"},
			PublishNotReadyAddresses: publishNotReady,
			Ports:                    []corev1.ServicePort{{Name: "peer", Port: 2888}},
		},
	}
	if _, err := c.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
}

// statefulSet creates StatefulSet "web" governed by service "web".
func statefulSet(t *testing.T, c kubernetes.Interface, ns string, replicas int32, policy appsv1.PodManagementPolicyType, annotations map[string]string) {
	t.Helper()
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         "web",
			PodManagementPolicy: policy,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: annotations},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app",
					Ports: []corev1.ContainerPort{{Name: "peer", ContainerPort: 2888}},
				}}},
			},
		},
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
}

func scale(t *testing.T, c kubernetes.Interface, ns string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := c.AppsV1().StatefulSets(ns).Patch(context.Background(), "web", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale to %d: %v", replicas, err)
	}
}

// runningPod waits until pod name runs with an IP and, when notUID is set,
// has another UID than that. It returns the pod.
func runningPod(t *testing.T, c kubernetes.Interface, ns, name, notUID string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" &&
			p.DeletionTimestamp == nil && string(p.UID) != notUID {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s not running (uid other than %q) after %s: %v", ns, name, notUID, wait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pf is one peer-finder run: the pod it plays and the flags it gets on top
// of the service, namespace, domain and DNS server.
type pf struct {
	c      *cluster.Cluster
	ns     string
	pod    string
	podUID string // $POD_UID; empty: peer-finder reads its pod
	args   []string
}

func (p pf) env() config.Env {
	vars := map[string]string{"POD_NAMESPACE": p.ns, "POD_NAME": p.pod, "POD_UID": p.podUID}
	return config.Env{
		Getenv:     func(k string) string { return vars[k] },
		Hostname:   func() (string, error) { return p.pod, nil },
		ResolvConf: func() ([]byte, error) { return nil, os.ErrNotExist },
	}
}

func (p pf) argv(extra ...string) []string {
	base := []string{"-service=web", "-domain=" + p.c.Domain, "-dns-server=" + p.c.DNSAddr, "-poll-period=100ms"}
	return slices.Concat(base, p.args, extra)
}

// main runs peer-finder to completion and returns its exit status and output.
func (p pf) main(ctx context.Context, extra ...string) (int, string, string) {
	var stdout, stderr syncbuf.Buffer
	code := peerfinder.Main(ctx, p.argv(extra...), p.env(), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// hook is a recording hook script: every run writes the peers it got on
// stdin and PEER_FINDER_BOOTSTRAP to files named by PEER_FINDER_GENERATION.
type hook struct{ dir string }

func newHook(t *testing.T) hook {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
set -e
cat > "$1/$PEER_FINDER_GENERATION.peers"
printf '%s' "${PEER_FINDER_BOOTSTRAP-unset}" > "$1/$PEER_FINDER_GENERATION.tmp"
mv "$1/$PEER_FINDER_GENERATION.tmp" "$1/$PEER_FINDER_GENERATION.role"
`
	if err := os.WriteFile(filepath.Join(dir, "hook.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	return hook{dir: dir}
}

// command is the hook's command line for -on-start or -on-change.
func (h hook) command() string {
	return "/bin/sh " + filepath.Join(h.dir, "hook.sh") + " " + filepath.Join(h.dir, "out")
}

// delivery is one completed hook run.
type delivery struct {
	gen   int
	peers []string // first labels, sorted
	role  string
}

// deliveries returns the completed hook runs in generation order.
func (h hook) deliveries(t *testing.T) []delivery {
	t.Helper()
	out := filepath.Join(h.dir, "out")
	files, err := filepath.Glob(filepath.Join(out, "*.role"))
	if err != nil {
		t.Fatal(err)
	}
	var ds []delivery
	for _, f := range files {
		gen, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".role"))
		if err != nil {
			t.Fatal(err)
		}
		role, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := os.ReadFile(filepath.Join(out, strconv.Itoa(gen)+".peers"))
		if err != nil {
			t.Fatal(err)
		}
		d := delivery{gen: gen, role: string(role)}
		for line := range strings.Lines(string(stdin)) {
			d.peers = append(d.peers, strings.SplitN(strings.TrimSpace(line), ".", 2)[0])
		}
		slices.Sort(d.peers)
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b delivery) int { return a.gen - b.gen })
	return ds
}

// waitDelivery waits for a delivery of exactly the named peers and returns
// every delivery so far.
func (h hook) waitDelivery(t *testing.T, want ...string) []delivery {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(wait)
	for {
		ds := h.deliveries(t)
		if len(ds) > 0 && slices.Equal(ds[len(ds)-1].peers, want) {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivery of %v after %s; deliveries: %v", want, wait, ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
