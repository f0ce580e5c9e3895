package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/internal/testing/logtest"
)

// peersHook reads the JSON document peer-finder gives it on stdin
// (-format=json), keeps it, and resolves every peer's FQDN through the
// pod's resolver (CoreDNS): "<fqdn> <address>" per peer in /work/resolved,
// replaced whole. A name that does not resolve fails the run (retried).
const peersHook = `#!/bin/sh
set -eu
cat > /work/hook.json.new
: > /work/resolved.new
for fqdn in $(grep -o '"fqdn": *"[^"]*"' /work/hook.json.new | sed 's/.*"\([^"]*\)"$/\1/'); do
  addr=$(getent hosts "$fqdn" | awk '{print $1; exit}')
  if [ -z "$addr" ]; then
    echo "hook: $fqdn does not resolve" >&2
    exit 1
  fi
  echo "$fqdn $addr" >> /work/resolved.new
done
mv /work/hook.json.new /work/hook.json
mv /work/resolved.new /work/resolved
echo "$PEER_FINDER_GENERATION $(date +%s) $PEER_FINDER_SELF" >> /work/runs
echo "hook: generation $PEER_FINDER_GENERATION resolved $(wc -l < /work/resolved) peers"
`

// peerDoc is the part of peer-finder's JSON document the test reads.
type peerDoc struct {
	Self       string `json:"self"`
	Generation int    `json:"generation"`
	Peers      []struct {
		FQDN string   `json:"fqdn"`
		IPs  []string `json:"ips"`
		Pod  string   `json:"pod"`
	} `json:"peers"`
}

// TestDeploymentPeersFromSelf runs seed 002's flow whole in real pods: a
// Deployment with no Service, its pods finding each other through the API
// server with peer-finder -source=pods -selector-from-self=app and the
// examples/rbac Role for it as written. Peers are named by pod IP
// (<ip-with-dashes>.<ns>.pod.cluster.local) and resolved through CoreDNS by
// a hook that reads the JSON document; -stable-for holds each delivery until
// the set has not changed for that long; peer-finder -diagnose, run with
// kubectl exec in a running pod with the same flags, agrees.
func TestDeploymentPeersFromSelf(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.rbac("pods-selector-from-self.yaml")
	b.dumpOnFailure("app=peers")
	ctx := context.Background()
	if _, err := b.Client.CoreV1().ConfigMaps(b.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "peers-scripts"}, Data: map[string]string{"on-change.sh": peersHook},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const stableFor = 6 * time.Second
	flags := []string{"-source=pods", "-selector-from-self=app", fmt.Sprintf("-stable-for=%s", stableFor)}
	spec := corev1.PodSpec{
		ServiceAccountName: "peer-finder",
		Containers: []corev1.Container{{
			Name: "peer-finder", Image: Image,
			Args: append(slices.Clone(flags), "-format=json", "-on-change=/scripts/on-change.sh", "-json-file=/work/peers.json"),
			Env: []corev1.EnvVar{
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			VolumeMounts:    []corev1.VolumeMount{{Name: "scripts", MountPath: "/scripts"}, {Name: "work", MountPath: "/work"}},
			SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true)},
		}},
		Volumes: []corev1.Volume{
			{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "peers-scripts"}, DefaultMode: ptr.To[int32](0o755)}}},
			{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	onRealNode(&spec)
	labels := map[string]string{"app": "peers"}
	if _, err := b.Client.AppsV1().Deployments(b.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "peers"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if svcs, err := b.Client.CoreV1().Services(b.ns).List(ctx, metav1.ListOptions{}); err != nil || len(svcs.Items) != 0 {
		t.Fatalf("services in the namespace: %v (%v), want none", svcs, err)
	}

	pods := b.waitRunning("app=peers", "peer-finder", 3)
	b.checkPeersByIP(pods, stableFor)

	// One more replica: each earlier pod's hook runs again with four
	// peers, not before the set was stable for -stable-for after the new
	// pod became ready (the set's last change).
	if _, err := b.Client.AppsV1().Deployments(b.ns).Patch(ctx, "peers", "application/merge-patch+json", []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pods = b.waitRunning("app=peers", "peer-finder", 4)
	b.checkPeersByIP(pods, stableFor)
	for _, p := range pods {
		if log := b.logs(p.Name, "peer-finder", false); len(logtest.Find(logtest.ParseText(log), "waiting before delivery", "reason", "not-stable-yet")) == 0 {
			t.Errorf("%s: no delivery held as not-stable-yet:\n%s", p.Name, log)
		}
	}

	// -diagnose with the same flags, by kubectl exec in a running pod.
	// (Through the API server's exec as kubectl does when kubectl is
	// not installed.)
	diagnose := append([]string{"/peer-finder", "-diagnose"}, flags...)
	var out []byte
	var err error
	if kubectl, lerr := exec.LookPath("kubectl"); lerr == nil {
		out, err = exec.Command(kubectl, append([]string{"--kubeconfig", b.Kubeconfig, "-n", b.ns, "exec", pods[0].Name, "-c", "peer-finder", "--"}, diagnose...)...).CombinedOutput()
	} else {
		var s string
		s, err = b.exec(pods[0].Name, "peer-finder", diagnose...)
		out = []byte(s)
	}
	t.Logf("kubectl exec %s -- peer-finder -diagnose %s: %v\n%s", pods[0].Name, strings.Join(flags, " "), err, out)
	self := podFQDN(pods[0].Status.PodIP, b.ns)
	for _, want := range []string{self, "ok", "verdict"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-diagnose output lacks %q", want)
		}
	}
	for _, p := range pods {
		if !strings.Contains(string(out), podFQDN(p.Status.PodIP, b.ns)) {
			t.Errorf("-diagnose does not list the peer %s (%s)", p.Name, p.Status.PodIP)
		}
	}
	if err != nil || strings.Contains(string(out), "MISSING") {
		t.Errorf("-diagnose in a running pod: %v, want status 0 (a run would deliver) and no permission missing", err)
	}
}

// podFQDN is the name Kubernetes DNS gives a pod by its IP.
func podFQDN(ip, ns string) string {
	return fmt.Sprintf("%s.%s.pod.cluster.local", strings.NewReplacer(".", "-", ":", "-").Replace(ip), ns)
}

// lastReady is when the last of the ready pods of selector became ready.
func (b *bed) lastReady(selector string) time.Time {
	b.t.Helper()
	list, err := b.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		b.t.Fatal(err)
	}
	var last time.Time
	for _, p := range list.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(last) {
				last = c.LastTransitionTime.Time
			}
		}
	}
	return last
}

// checkPeersByIP waits until the hook in each of pods has run with exactly
// pods as peers, named by their IPs, and checks what it and the JSON file
// sink wrote: the document's peers are the pods (FQDN, address, pod name),
// PEER_FINDER_SELF is the pod's own name, every FQDN resolved through
// CoreDNS to the pod's address, the JSON file holds the same document, and
// the run came no sooner than stableFor after the last pod became ready.
func (b *bed) checkPeersByIP(pods []corev1.Pod, stableFor time.Duration) {
	b.t.Helper()
	want := map[string]string{} // FQDN -> pod IP
	byFQDN := map[string]string{}
	var lastReady time.Time
	for _, p := range pods {
		f := podFQDN(p.Status.PodIP, b.ns)
		want[f], byFQDN[f] = p.Status.PodIP, p.Name
	}
	for _, p := range pods {
		var doc peerDoc
		var resolved string
		b.WaitFor(b.t, fmt.Sprintf("%s's hook ran with the %d pods", p.Name, len(pods)), 2*time.Minute, func(context.Context) (bool, error) {
			raw, err := b.exec(p.Name, "peer-finder", "cat", "/work/hook.json")
			if err != nil {
				return false, fmt.Errorf("no document yet: %w", err)
			}
			doc = peerDoc{}
			if err := json.Unmarshal([]byte(raw), &doc); err != nil {
				return false, fmt.Errorf("the hook's document: %w\n%s", err, raw)
			}
			if len(doc.Peers) != len(pods) {
				return false, fmt.Errorf("%d peers in the document", len(doc.Peers))
			}
			resolved, err = b.exec(p.Name, "peer-finder", "cat", "/work/resolved")
			return err == nil, err
		})
		self := podFQDN(p.Status.PodIP, b.ns)
		if doc.Self != self {
			b.t.Errorf("%s: document self %q, want %q", p.Name, doc.Self, self)
		}
		for _, peer := range doc.Peers {
			if ip, ok := want[peer.FQDN]; !ok || !slices.Equal(peer.IPs, []string{ip}) || peer.Pod != byFQDN[peer.FQDN] {
				b.t.Errorf("%s: peer %s %v pod %q, want one of %v (by pod IP)", p.Name, peer.FQDN, peer.IPs, peer.Pod, want)
			}
		}
		lines := strings.Split(strings.TrimSpace(resolved), "\n")
		for f, ip := range want {
			if !slices.Contains(lines, f+" "+ip) {
				b.t.Errorf("%s: %s did not resolve to %s through CoreDNS in the pod; the hook resolved:\n%s", p.Name, f, ip, resolved)
			}
		}
		file, err := b.exec(p.Name, "peer-finder", "cat", "/work/peers.json")
		var fdoc peerDoc
		if err != nil || json.Unmarshal([]byte(file), &fdoc) != nil || fdoc.Generation != doc.Generation || len(fdoc.Peers) != len(doc.Peers) {
			b.t.Errorf("%s: -json-file %v, generation %d with %d peers; the hook had generation %d with %d:\n%s", p.Name, err, fdoc.Generation, len(fdoc.Peers), doc.Generation, len(doc.Peers), file)
		}
		runs, _ := b.exec(p.Name, "peer-finder", "tail", "-n", "1", "/work/runs")
		if lastReady.IsZero() {
			lastReady = b.lastReady("app=peers")
		}
		var gen int
		var at int64
		var runSelf string
		if _, err := fmt.Sscan(runs, &gen, &at, &runSelf); err != nil || runSelf != self || gen != doc.Generation {
			b.t.Errorf("%s: last hook run %q (%v), want generation %d as %s", p.Name, runs, err, doc.Generation, self)
		}
		// Whole seconds on both sides (the condition's time and date +%s).
		if ran := time.Unix(at, 0); ran.Before(lastReady.Add(stableFor - time.Second)) {
			b.t.Errorf("%s: the hook ran at %s, %s after the last pod became ready: -stable-for=%s not honoured", p.Name, ran.Format(time.TimeOnly), ran.Sub(lastReady), stableFor)
		}
	}
}
