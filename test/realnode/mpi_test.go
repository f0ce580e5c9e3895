package realnode

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flockd/flock/localcluster/apps"
)

// mpiExample is the MPI example's manifest.
const mpiExample = "examples/batch/mpi/mpi.yaml"

// sshKeyPair returns a new ed25519 key pair as ssh-keygen writes it: the
// private key in OpenSSH's format (unencrypted) and the public key's
// authorized_keys line, for the example's Secret mpi-ssh.
func sshKeyPair(t *testing.T) (private, authorized []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	str := func(b []byte, s []byte) []byte {
		return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
	}
	blob := str(str(nil, []byte("ssh-ed25519")), pub)
	check := binary.BigEndian.AppendUint32(nil, 0x6d706931)
	secret := append(append(check, check...), blob...)
	secret = str(secret, priv)
	secret = str(secret, []byte("mpi"))
	for i := byte(1); len(secret)%8 != 0; i++ {
		secret = append(secret, i)
	}
	key := []byte("openssh-key-v1\x00")
	key = str(str(str(key, []byte("none")), []byte("none")), nil)
	key = binary.BigEndian.AppendUint32(key, 1)
	key = str(str(key, blob), secret)
	return pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: key}),
		[]byte("ssh-ed25519 " + base64.StdEncoding.EncodeToString(blob) + " mpi\n")
}

// mpiSecret creates the Secret the example's README says to create.
func (b *bed) mpiSecret() {
	b.t.Helper()
	private, authorized := sshKeyPair(b.t)
	_, err := b.Client.CoreV1().Secrets(b.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "mpi-ssh"},
		Data:       map[string][]byte{"id_ed25519": private, "authorized_keys": authorized},
	}, metav1.CreateOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
}

// waitJobComplete waits until the Job is Complete, failing if it fails.
func (b *bed) waitJobComplete(name string, timeout time.Duration) {
	b.t.Helper()
	b.WaitFor(b.t, "Job "+name+" Complete", timeout, func(ctx context.Context) (bool, error) {
		j, err := b.Client.BatchV1().Jobs(b.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				b.t.Fatalf("Job %s failed: %s: %s", name, c.Reason, c.Message)
			}
		}
		return false, nil
	})
}

// checkMPIRun checks the launcher's log and the pods of a finished run of
// the example: the Jobs Complete, check.py passed with the right sum, each
// rank on the worker its hostfile line names, and the ranks on as many
// nodes as the workers' pods (at least 2); every pod ran with
// runAsNonRoot, as the example claims, and no container asked for root.
func (b *bed) checkMPIRun() {
	b.t.Helper()
	b.waitJobComplete("launcher", 5*time.Minute)
	b.waitJobComplete("worker", time.Minute)
	pods, err := b.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=mpi"})
	if err != nil {
		b.t.Fatal(err)
	}
	var launcher string
	nodeOf := map[string]string{} // worker's host name -> node, of the pods that succeeded
	for _, p := range pods.Items {
		sc := p.Spec.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			b.t.Errorf("%s runs without runAsNonRoot: %+v", p.Name, sc)
		}
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if s := c.SecurityContext; s != nil && (s.RunAsUser != nil && *s.RunAsUser == 0 || s.RunAsNonRoot != nil && !*s.RunAsNonRoot) {
				b.t.Errorf("%s/%s asks for root: %+v", p.Name, c.Name, s)
			}
		}
		if p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		switch p.Labels["role"] {
		case "launcher":
			launcher = p.Name
		case "worker":
			nodeOf[p.Spec.Hostname] = p.Spec.NodeName
		}
	}
	if launcher == "" {
		b.t.Fatal("no launcher pod succeeded")
	}
	log := b.logs(launcher, "mpi", false)
	b.t.Logf("launcher's log:\n%s", log)
	for _, want := range []string{"allreduce sum 6, want 6\n", "PASSED\n", "mpirun exited 0\n"} {
		if !strings.Contains(log, want) {
			b.t.Errorf("launcher's log lacks %q", want)
		}
	}
	nodes := map[string]bool{}
	for i := range 3 {
		w := "worker-" + strconv.Itoa(i)
		want := fmt.Sprintf("rank %d on %s (node %s): hostfile says %s: ok\n", i, w, nodeOf[w], w)
		if !strings.Contains(log, want) {
			b.t.Errorf("launcher's log lacks %q", want)
		}
		nodes[nodeOf[w]] = true
	}
	if len(nodes) < 2 || !strings.Contains(log, fmt.Sprintf("ranks on %d nodes\n", len(nodes))) {
		b.t.Errorf("ranks on nodes %v, want at least 2, as the log says", nodes)
	}
}

// TestExampleMPI runs examples/batch/mpi as written, with the Secret its
// README says to make: mpirun on the launcher reaches the three workers by
// flock's names over ssh, every rank runs on the worker its hostfile line
// names, the allreduce sums right, the Jobs complete, and the ranks run on
// different nodes (one worker per node), all without root.
func TestExampleMPI(t *testing.T) {
	b := newBed(t)
	b.NeedRealNodes(t, 3)
	b.dumpOnFailure("app=mpi")
	b.mpiSecret()
	b.apply(repoFile(t, mpiExample), b.forRealNode)
	b.checkMPIRun()
}

// getentUntil runs getent hosts NAME every 10ms until it gives an address
// other than OLD, then prints the time (Unix ns) it did and the address
// (busybox's date has no nanoseconds). It is a reader too: each lookup
// asks for the names after OLD as well, which must keep their first
// answers (a torn read of the hosts file loses or garbles a line); it then
// prints the lookups, the bad ones, and how often the inode behind
// /etc/hosts changed from one lookup to the next (a file replaced by
// rename, as the example writes it, gets a new one; a file rewritten in
// place never does; start and end alone may match, as the file system
// reuses a freed inode). The first bad lookups go to stderr.
const getentUntil = `import os, subprocess, sys, time
name, old, steady = sys.argv[1], sys.argv[2], sys.argv[3:]
def look():
    out = subprocess.run(["getent", "hosts", name, *steady], capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        f = line.split()
        for k in [name, *steady]:
            if k in f[1:]:
                got[k] = f[0]
    return got
want, ino = look(), os.stat("/etc/hosts").st_ino
n = bad = changes = 0
while True:
    got = look()
    n += 1
    now = os.stat("/etc/hosts").st_ino
    changes, ino = changes + (now != ino), now
    if any(k not in want or got.get(k) != want[k] for k in steady):
        bad += 1
        if bad <= 3:
            print("BAD lookup", n, got, "want", want, file=sys.stderr)
    if got.get(name, old) != old:
        break
    time.sleep(0.01)
print(time.time_ns(), got[name], n, bad, changes)
`

// failFirstWorker1 is the test's only change to the example besides
// forRealNode: worker-1's first attempt (the Job's failure count for index
// 1 is 0) exits 3 ten seconds after it starts, before its sshd, so mpirun
// cannot have started; the Job retries it with a new pod.
func failFirstWorker1(o *unstructured.Unstructured) {
	if o.GetKind() != "Job" || o.GetName() != "worker" {
		return
	}
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	env, _, _ := unstructured.NestedSlice(c, "env")
	c["env"] = append(env, map[string]any{"name": "FAILURES", "valueFrom": map[string]any{"fieldRef": map[string]any{
		"fieldPath": "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"}}})
	cmd, _, _ := unstructured.NestedStringSlice(c, "command")
	c["command"] = []any{"sh", "-c", `if [ "$JOB_COMPLETION_INDEX" = 1 ] && [ "$FAILURES" = 0 ]; then sleep 10; echo failing once; exit 3; fi; exec ` + strings.Join(cmd, " ")}
	_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
}

// maxNewIPLag is the most a retried worker's new IP may take from its pod's
// status to every other pod's getent: a delivery is driven by the pods
// watch (measured 25-160 ms on the local cluster); a bound 50 times that
// fails only when the IP waits for something else (a resync, a backoff).
const maxNewIPLag = 10 * time.Second

// TestExampleMPIWorkerRetried runs the example with worker-1's first
// attempt failing before mpirun starts: the Job retries it with a new pod
// and IP, every other pod's getent hosts worker-1 gives the new IP within
// maxNewIPLag of the new pod's IP in its status (each pod's time logged),
// the other names never miss nor change meanwhile (a reader in each pod),
// the hosts file is replaced (a new inode behind /etc/hosts), and the MPI
// job still completes with the right sum.
func TestExampleMPIWorkerRetried(t *testing.T) {
	b := newBed(t)
	b.NeedRealNodes(t, 3)
	b.dumpOnFailure("app=mpi")
	b.mpiSecret()
	b.apply(repoFile(t, mpiExample), func(o *unstructured.Unstructured) {
		b.forRealNode(o)
		failFirstWorker1(o)
	})

	// The first worker-1 with an IP.
	const worker1Selector = "role=worker,batch.kubernetes.io/job-completion-index=1"
	var first, second *corev1.Pod
	b.WaitFor(t, "worker-1's first pod with an IP", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := b.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: worker1Selector})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.PodIP != "" {
				first = p
			}
		}
		return first != nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Every other pod's mpi container runs getent hosts worker-1 until it
	// gives another IP than the first pod's: the container's own clock (the
	// nodes share the host's) says when. They start before the first pod
	// fails, so the time is not an exec's start.
	others := b.waitRunning("app=mpi,batch.kubernetes.io/job-completion-index notin (1)", "mpi", 3)
	exec := apps.NewExec(b.Config, b.Client)
	type resolved struct {
		at time.Time
		ip string
	}
	var mu sync.Mutex
	got := map[string]resolved{}
	var wg sync.WaitGroup
	for _, p := range others {
		wg.Go(func() {
			out, err := exec(ctx, b.ns, p.Name, "mpi", "python3", "-c", getentUntil, "worker-1", first.Status.PodIP, "launcher-0", "worker-0", "worker-2")
			line, bads, _ := strings.Cut(out, "\n") // stdout's line, then stderr's
			f := strings.Fields(line)
			if err != nil || len(f) != 5 {
				t.Errorf("%s: getent hosts worker-1 never gave another IP than %s: %v (%q)", p.Name, first.Status.PodIP, err, out)
				return
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				t.Errorf("%s: time %q", p.Name, out)
				return
			}
			t.Logf("reader in %s: %s lookups, %s bad; /etc/hosts replaced %s times", p.Spec.Hostname, f[2], f[3], f[4])
			if f[3] != "0" {
				t.Errorf("%s: %s lookups of launcher-0, worker-0, worker-2 during the retry lost or changed an entry (torn read):\n%s", p.Spec.Hostname, f[3], bads)
			}
			if f[4] == "0" {
				t.Errorf("%s: /etc/hosts kept its inode through the retry's rewrites: rewritten in place, not replaced through the directory", p.Spec.Hostname)
			}
			mu.Lock()
			got[p.Spec.Hostname] = resolved{time.Unix(0, ns), f[1]}
			mu.Unlock()
		})
	}

	// The new pod's IP, seen by a watch as peer-finder sees it, starts the
	// clock.
	w, err := b.Client.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{LabelSelector: worker1Selector})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var sawIP time.Time
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && p.UID != first.UID && p.Status.PodIP != "" {
			second, sawIP = p, time.Now()
			break
		}
	}
	if second == nil {
		t.Fatalf("no second worker-1 pod with an IP: %v", ctx.Err())
	}
	t.Logf("worker-1 retried: %s (%s, %s) -> %s (%s, %s)", first.Name, first.Status.PodIP, first.Spec.NodeName,
		second.Name, second.Status.PodIP, second.Spec.NodeName)
	if first.Status.PodIP == second.Status.PodIP {
		t.Fatalf("the retried worker-1 has the old IP %s: no change to see", first.Status.PodIP)
	}
	if log := b.logs(first.Name, "mpi", false); !strings.Contains(log, "failing once") {
		t.Errorf("the first worker-1 did not fail as injected:\n%s", log)
	}
	wg.Wait()
	lags := map[string]time.Duration{}
	var all []time.Duration
	for host, r := range got {
		if r.ip != second.Status.PodIP {
			t.Errorf("%s: getent hosts worker-1 gave %s, want the new pod's %s", host, r.ip, second.Status.PodIP)
		}
		lags[host] = r.at.Sub(sawIP)
		all = append(all, lags[host])
		if lags[host] > maxNewIPLag {
			t.Errorf("%s resolved worker-1's new IP %v after it was in the pod's status, want at most %v", host, lags[host], maxNewIPLag)
		}
	}
	slices.Sort(all)
	if len(all) == len(others) && len(all) > 0 {
		t.Logf("new IP of worker-1 in its pod's status to getent in each other pod: %v (p50 %v, max %v)", lags, all[len(all)/2], all[len(all)-1])
	}
	b.checkMPIRun()
}
