package realnode

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/clustertest"
)

// TestExampleFlockNodePinned runs examples/flock/node-pinned.yaml (with the
// scripts and RBAC of examples/apps/etcd, as its header says) on three real
// nodes: NodePinned places one member per node, peer-finder tells exactly
// one member to form and the others to join, and they make one cluster: a
// key written through member 0 is read on member 2, every member reports
// the same cluster ID, and each member's data is in its own node's
// directory and in no other's.
func TestExampleFlockNodePinned(t *testing.T) {
	b := newBed(t)
	e := b.nodePinnedEtcd()
	if e.on["etcd-0"] == e.on["etcd-1"] || e.on["etcd-1"] == e.on["etcd-2"] || e.on["etcd-0"] == e.on["etcd-2"] {
		t.Errorf("members share nodes: %v", e.on)
	}
	e.put("etcd-0", "flock", b.ns)
	e.waitKey("etcd-2", "flock", b.ns)
	formed := 0
	for _, m := range e.members {
		if log := b.logs(m, "etcd", false); strings.Contains(log, "forming a new cluster") {
			formed++
		} else if !strings.Contains(log, "added to the cluster as a learner") {
			t.Errorf("%s neither formed nor joined:\n%s", m, log)
		}
	}
	if formed != 1 {
		t.Errorf("%d members formed a cluster, want exactly 1", formed)
	}
	ids := map[string]bool{}
	for _, m := range e.members {
		ids[e.status(m).Header.ClusterID] = true
	}
	if len(ids) != 1 {
		t.Errorf("cluster IDs %v, want one", ids)
	}
	// Each member's data is on its node, in its node's own directory.
	for _, m := range e.members {
		for _, n := range e.nodes {
			found, _ := filepath.Glob(n.HostPath(filepath.Join(localcluster.NodeLocalDir, b.ns, "etcd", "*", "data", "member")))
			if want := n.Name == e.on[m]; want && len(found) != 1 || !want && len(found) > 1 {
				t.Errorf("node %s holds %d etcd data dirs %v; %s runs on %s", n.Name, len(found), found, m, e.on[m])
			}
		}
	}
}

// nodePinnedEtcd is examples/flock/node-pinned.yaml running on three real
// nodes, one member each.
type nodePinnedEtcd struct {
	b       *bed
	nodes   []*localcluster.RealNode
	members []string
	on      map[string]string // member -> node
}

// nodePinnedEtcd applies the example as its header says, with the real
// nodes' toleration, with flock-controller as shipped, and returns once
// every member is Ready.
func (b *bed) nodePinnedEtcd() *nodePinnedEtcd {
	t := b.t
	t.Helper()
	nodes := b.NeedRealNodes(t, 3)
	b.flockController()
	// The example's eligible nodes carry node-role.example.com/db=true.
	for _, n := range nodes[:3] {
		b.labelNode(n.Name, "node-role.example.com/db", "true")
		t.Cleanup(func() { _ = os.RemoveAll(n.HostPath(filepath.Join(localcluster.NodeLocalDir, b.ns))) })
	}
	b.apply(repoFile(t, "examples/apps/etcd/rbac.yaml"), b.forRealNode)
	b.apply(repoFile(t, "examples/apps/etcd/scripts.yaml"), nil)
	b.apply(repoFile(t, "examples/flock/node-pinned.yaml"), func(o *unstructured.Unstructured) {
		if o.GetKind() == "Flock" { // tolerate the real nodes' taint
			_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{
				"key": localcluster.RealNodeLabel, "operator": "Equal", "value": "true", "effect": "NoSchedule",
			}}, "spec", "tolerations")
		}
	})
	b.dumpOnFailure(flockv1.FlockLabel + "=etcd")
	e := &nodePinnedEtcd{b: b, nodes: nodes, members: []string{"etcd-0", "etcd-1", "etcd-2"}, on: map[string]string{}}
	for _, m := range e.members {
		e.refresh(m)
	}
	return e
}

// refresh waits until member m runs and is Ready (so its status is its
// kubelet's latest: a node that comes back may give it a new sandbox and
// IP) and records its node.
func (e *nodePinnedEtcd) refresh(m string) *corev1.Pod {
	e.b.t.Helper()
	p := e.b.waitPod(m, "running and Ready", 3*time.Minute, func(p *corev1.Pod) bool {
		return p.DeletionTimestamp == nil && clustertest.PodReady(p) && containerRunning("etcd")(p)
	})
	e.on[m] = p.Spec.NodeName
	return p
}

// call posts body to member m's JSON gateway at its current pod IP.
func (e *nodePinnedEtcd) call(ctx context.Context, m, path, body string) (string, error) {
	p, err := e.b.Client.CoreV1().Pods(e.b.ns).Get(ctx, m, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return etcdHTTP(ctx, p.Status.PodIP, path, body)
}

// put writes key=value through member m, retrying until it succeeds.
func (e *nodePinnedEtcd) put(m, key, value string) {
	e.b.t.Helper()
	body := fmt.Sprintf(`{"key":%q,"value":%q}`, b64(key), b64(value))
	e.b.WaitFor(e.b.t, "a put of "+key+" through "+m, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := e.call(ctx, m, "/v3/kv/put", body)
		return err == nil, nil
	})
}

// waitKey waits until member m serves key=value.
func (e *nodePinnedEtcd) waitKey(m, key, value string) {
	e.b.t.Helper()
	e.b.WaitFor(e.b.t, key+"="+value+" read on "+m, 2*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := e.call(ctx, m, "/v3/kv/range", fmt.Sprintf(`{"key":%q}`, b64(key)))
		return err == nil && strings.Contains(body, b64(value)), nil
	})
}

// etcdStatus is what /v3/maintenance/status says of a member.
type etcdStatus struct {
	Header struct {
		ClusterID string `json:"cluster_id"`
		MemberID  string `json:"member_id"`
	} `json:"header"`
}

// status is member m's etcd status, once it answers.
func (e *nodePinnedEtcd) status(m string) etcdStatus {
	e.b.t.Helper()
	var st etcdStatus
	e.b.WaitFor(e.b.t, m+"'s etcd status", 2*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := e.call(ctx, m, "/v3/maintenance/status", "{}")
		return err == nil && json.Unmarshal([]byte(body), &st) == nil && st.Header.MemberID != "", nil
	})
	return st
}

// memberID is member m's etcd member ID, which it keeps as long as it keeps
// its data directory.
func (e *nodePinnedEtcd) memberID(m string) string { return e.status(m).Header.MemberID }

// labelNode sets a label on a node until the test ends.
func (b *bed) labelNode(node, key, value string) {
	b.t.Helper()
	label := func(v string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, v)
		_, err := b.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := label(strconv.Quote(value)); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = label("null") })
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// etcdHTTP posts body to etcd's JSON gateway on a member's pod IP, which
// this machine routes to every real node's bridge.
func etcdHTTP(ctx context.Context, ip, path, body string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+net.JoinHostPort(ip, "2379")+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	return string(b), err
}

// TestExampleFlockNetworkStorage runs examples/flock/network-storage.yaml:
// a Flock in NetworkStorage mode, three Redis members each serving from its
// own claim of the volumeClaimTemplates (the local cluster's default
// StorageClass stands for network storage); a member's pod deleted comes
// back on the same claim with its data. The stand-in for redis:7 is flock's
// Redis image (Debian's redis-server as its entrypoint), tagged redis:7 in
// the node's containerd.
func TestExampleFlockNetworkStorage(t *testing.T) {
	b := newBed(t)
	manifest := repoFile(t, "examples/flock/network-storage.yaml")
	if !bytes.Contains(manifest, []byte("image: redis:7")) {
		t.Fatal("network-storage.yaml no longer uses redis:7; update the stand-in")
	}
	b.ctr("images", "tag", "--force", "ghcr.io/flockd/apps/redis:dev", "docker.io/library/redis:7")
	b.flockController()
	b.apply(manifest, b.forRealNode)

	redis := func(pod string, args ...string) string {
		out, _ := b.exec(pod, "redis", append([]string{"redis-cli", "-h", "127.0.0.1"}, args...)...)
		return strings.TrimSpace(out)
	}
	pods := []string{"cache-0", "cache-1", "cache-2"}
	for _, p := range pods {
		b.WaitFor(t, p+"'s Redis answering", 3*time.Minute, func(context.Context) (bool, error) {
			return redis(p, "ping") == "PONG", nil
		})
		if got := redis(p, "config", "get", "dir"); !strings.HasSuffix(got, "/data") {
			t.Errorf("%s serves from %q, want /data (the example's args)", p, got)
		}
		claim, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Get(context.Background(), "data-"+p, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s's claim: %v", p, err)
		}
		if claim.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim data-%s is %s, want Bound", p, claim.Status.Phase)
		}
	}
	if got := redis("cache-1", "set", "member", "cache-1"); got != "OK" {
		t.Fatalf("set on cache-1: %q", got)
	}
	old, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Get(context.Background(), "data-cache-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.deletePod("cache-1", "")
	b.WaitFor(t, "cache-1's Redis answering again", 3*time.Minute, func(context.Context) (bool, error) {
		return redis("cache-1", "ping") == "PONG", nil
	})
	if got := redis("cache-1", "get", "member"); got != "cache-1" {
		t.Errorf("cache-1 re-created: get member = %q, want the value written before (its claim's append-only file)", got)
	}
	now, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Get(context.Background(), "data-cache-1", metav1.GetOptions{})
	if err != nil || now.UID != old.UID {
		t.Errorf("cache-1's claim after the restart: %v (uid %s, want %s)", err, now.GetUID(), old.UID)
	}
}
