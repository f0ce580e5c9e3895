package realnode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flockd/flock/localcluster/apps"
	"github.com/flockd/flock/localcluster/clustertest"
)

// etcdShape returns an edit for applyKustomizationWith that sets the
// StatefulSet's replicas and pod management policy.
func etcdShape(replicas int64, policy string) func(*unstructured.Unstructured) {
	return func(o *unstructured.Unstructured) {
		if o.GetKind() != "StatefulSet" {
			return
		}
		_ = unstructured.SetNestedField(o.Object, replicas, "spec", "replicas")
		_ = unstructured.SetNestedField(o.Object, policy, "spec", "podManagementPolicy")
	}
}

// walHeaderEnd returns the offset in an etcd write-ahead log file where the
// records wal.Create writes (CRC, metadata, an empty snapshot) end and the
// raft entries begin. Each record is framed by a little-endian uint64
// length whose top byte, when its high bit is set, holds the padding.
func walHeaderEnd(head []byte) (int, error) {
	off := 0
	for range 3 {
		if off+8 > len(head) {
			return 0, fmt.Errorf("write-ahead log shorter than its header: %d bytes", len(head))
		}
		field := binary.LittleEndian.Uint64(head[off:])
		n := int(field &^ (uint64(0xff) << 56))
		if field>>63 == 1 {
			n += int(field>>56) & 0x7
		}
		if n == 0 {
			return 0, fmt.Errorf("write-ahead log ends at %d, inside its header", off)
		}
		off += 8 + n
	}
	return off, nil
}

// TestAppEtcdFormerRestartsFromAnEmptyLog: the member that forms is stopped
// after etcd created its write-ahead log but before it wrote the first raft
// entry. Campaign run 21, round 82 (OrderedReady): etcd-0 was deleted 6.5 s
// into forming; restarted from that log (commit index 0, no voters) it never
// elected a leader, was never ready, and etcd-1 was never created. The
// window is milliseconds, so the test builds the state: a formed one-member
// cluster whose log is cut back to its header (its backend removed), etcd
// killed. run.sh must take that log for no data and form again; then the
// StatefulSet goes on to etcd-1, which joins.
func TestAppEtcdFormerRestartsFromAnEmptyLog(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.applyKustomizationWith("examples/apps/etcd", etcdShape(1, "OrderedReady"))
	b.waitEtcd(1, 3*time.Minute)

	const wal = "/var/lib/etcd/data/member/wal/0000000000000000-0000000000000000.wal"
	out, err := b.exec("etcd-0", "etcd", "sh", "-c", `od -An -v -tx1 -N 4096 "$1" | tr -d ' \n'`, "sh", wal)
	if err != nil {
		t.Fatalf("read %s: %v\n%s", wal, err, out)
	}
	head, err := hex.DecodeString(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("od output: %v", err)
	}
	end, err := walHeaderEnd(head)
	if err != nil {
		t.Fatal(err)
	}
	// Stopped first, so etcd writes nothing while its log is cut; killed
	// after, so run.sh ends and the kubelet restarts the container on the
	// same volume. A fresh member's entries fit well within 1 MiB.
	if out, err := b.exec("etcd-0", "etcd", "sh", "-c", `set -e
		pid=$(pidof etcd); kill -STOP "$pid"
		dd if=/dev/zero of="$1" bs=1 seek="$2" count=$((65536 - $2)) conv=notrunc 2>/dev/null
		dd if=/dev/zero of="$1" bs=65536 seek=1 count=15 conv=notrunc 2>/dev/null
		rm -f /var/lib/etcd/data/member/snap/db
		kill -KILL "$pid"`, "sh", wal, fmt.Sprint(end)); err != nil {
		t.Fatalf("cut etcd-0's log: %v\n%s", err, out)
	}
	b.waitPod("etcd-0", "restarted its etcd container", time.Minute, func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "etcd" && c.RestartCount > 0 {
				return true
			}
		}
		return false
	})
	id := b.waitEtcd(1, 2*time.Minute)
	if log := b.logs("etcd-0", "etcd", false); !strings.Contains(log, "no raft entry") || !strings.Contains(log, "forming a new cluster") {
		t.Errorf("etcd-0 did not take its empty log for no data and form:\n%s", log)
	}
	b.scale("etcd", 2)
	if got := b.waitEtcd(2, 3*time.Minute); got != id {
		t.Fatalf("scaled to 2: cluster id %x, want %x", got, id)
	}
}

// TestAppEtcdOrderedReadyKeepsReadyWithoutQuorum: under OrderedReady the
// StatefulSet re-creates etcd-1 only while etcd-0 is ready. Campaign run
// 21, round 221: etcd-1 was deleted while the cluster had two voters, which
// took the quorum, etcd-0's readiness (then /health, a quorum read) failed,
// and etcd-1 was never re-created. The test builds the state: etcd-1's etcd
// is frozen, so the cluster has no quorum; etcd-0, a member that has served,
// must stay ready; then etcd-1's pod is deleted, re-created, and the two
// form the same cluster again.
func TestAppEtcdOrderedReadyKeepsReadyWithoutQuorum(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.applyKustomizationWith("examples/apps/etcd", etcdShape(2, "OrderedReady"))
	id := b.waitEtcd(2, 3*time.Minute)
	if out, err := b.exec("etcd-1", "etcd", "sh", "-c", `kill -STOP "$(pidof etcd)"`); err != nil {
		t.Fatalf("freeze etcd-1's etcd: %v\n%s", err, out)
	}
	ex := apps.NewExec(b.Config, b.Client)
	b.WaitFor(t, "etcd-0 without quorum", time.Minute, func(ctx context.Context) (bool, error) {
		return !apps.ReadEtcd(ctx, ex, b.ns, "etcd-0").Healthy, nil
	})
	// The probe fails the pod after 2 failures: once its kubelet has run it
	// 3 more times (the first may have begun with the quorum), none of them
	// failed and etcd-0 is Ready.
	p, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), "etcd-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ok0, failed0 := b.readinessProbes(p, apps.EtcdContainer)
	b.WaitFor(t, "3 readiness probes of etcd-0 without quorum", time.Minute, func(context.Context) (bool, error) {
		ok, failed := b.readinessProbes(p, apps.EtcdContainer)
		if failed > failed0 {
			t.Fatalf("etcd-0's readiness probe failed %v times when the cluster lost its quorum: under OrderedReady etcd-1 would never be re-created", failed-failed0)
		}
		return ok >= ok0+3, fmt.Errorf("%v probes succeeded", ok-ok0)
	})
	if p, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), "etcd-0", metav1.GetOptions{}); err != nil || !clustertest.PodReady(p) {
		t.Errorf("etcd-0 not Ready (%v) after its probes passed without quorum", err)
	}
	b.deletePod("etcd-1", "")
	if got := b.waitEtcd(2, 3*time.Minute); got != id {
		t.Fatalf("etcd-1 re-created: cluster id %x, want %x", got, id)
	}
}

// TestAppEtcdStaleSetRemovesNoNewMember: on-change.sh runs with a set that
// a scale-up has since outgrown (it began before peer-finder saw the scale,
// and waited for a member list while a new pod added itself). It must not
// remove the new member: a member is removed only when two deliveries in a
// row lack it. The test builds the state: a formed 4-member cluster, and
// on-change.sh run by hand in etcd-0's sidecar with the 3 peers of before.
func TestAppEtcdStaleSetRemovesNoNewMember(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.applyKustomizationWith("examples/apps/etcd", etcdShape(4, "Parallel"))
	id := b.waitEtcd(4, 3*time.Minute)
	onChange := func(n int) (string, error) {
		var set []string
		for _, p := range b.podNames("etcd", n) {
			set = append(set, b.fqdn(p, "etcd"))
		}
		return b.exec("etcd-0", "peer-finder", "sh", "-c", `printf '%s\n' "$1" | tr ' ' '\n' | /scripts/on-change.sh`, "sh", strings.Join(set, " "))
	}
	// The stale set: the first delivery without etcd-3 fails (peer-finder
	// retries with its newest set) and removes nothing.
	if out, err := onChange(3); err == nil {
		t.Errorf("on-change.sh with a set lacking etcd-3 for the first time succeeded, want a failure (a retry):\n%s", out)
	}
	if got := b.waitEtcd(4, time.Minute); got != id {
		t.Fatalf("after a stale set: cluster id %x, want %x", got, id)
	}
	// The newest set has etcd-3: it is no longer a candidate, and a later
	// set lacking it is again only a first sighting.
	if out, err := onChange(4); err != nil {
		t.Fatalf("on-change.sh with the 4 peers: %v\n%s", err, out)
	}
	if out, err := onChange(3); err == nil {
		t.Errorf("on-change.sh with a set lacking etcd-3 after one that had it succeeded, want a failure:\n%s", out)
	}
	b.waitEtcd(4, time.Minute)
	// Lacking it twice in a row: removed, as on a scale-down. etcd can
	// refuse a removal for a few seconds after a member joined ("unhealthy
	// cluster"): the script fails and peer-finder retries, as here.
	b.WaitFor(t, "on-change.sh with a set lacking etcd-3 a second time to succeed", time.Minute, func(context.Context) (bool, error) {
		out, err := onChange(3)
		if err != nil {
			t.Logf("on-change.sh: %v\n%s", err, out)
		}
		return err == nil, nil
	})
	v := apps.ReadEtcd(context.Background(), apps.NewExec(b.Config, b.Client), b.ns, "etcd-0")
	if slices.Contains(v.Members, "etcd-3") || len(v.Members) != 3 {
		t.Errorf("after two sets lacking etcd-3, etcd-0 sees members %q (%s), want etcd-0..2", v.Members, v.Err)
	}
}

// readinessProbes returns how many readiness probes of the container
// named container in pod the kubelet of its node has run, by result (prober_probe_total
// of the kubelet's /metrics/probes, through the API server's node proxy).
func (b *bed) readinessProbes(pod *corev1.Pod, container string) (ok, failed float64) {
	b.t.Helper()
	raw, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", pod.Spec.NodeName, "proxy/metrics/probes").DoRaw(context.Background())
	if err != nil {
		b.t.Fatalf("kubelet probe metrics of %s: %v", pod.Spec.NodeName, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		b.t.Fatalf("parse kubelet probe metrics of %s: %v", pod.Spec.NodeName, err)
	}
	for _, m := range mf["prober_probe_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["pod_uid"] != string(pod.UID) || l["container"] != container || l["probe_type"] != "Readiness" {
			continue
		}
		switch l["result"] {
		case "successful":
			ok += m.GetCounter().GetValue()
		case "failed":
			failed += m.GetCounter().GetValue()
		}
	}
	return ok, failed
}
