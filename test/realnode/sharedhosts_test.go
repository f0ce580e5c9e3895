package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/apps"
)

// The shared directory examples/batch/shared-hosts/job.yaml names, its
// group, and the trainer image whose /etc/hosts links into it.
const (
	sharedHostsExampleDir = "/var/lib/flock-shared/train"
	sharedHostsGID        = 2000
	sharedHostsImage      = "ghcr.io/flockd/apps/shared-hosts:dev"
)

// sharedHostsNames are the job's names in the example.
var sharedHostsNames = []string{"ps-0", "worker-0", "worker-1", "worker-2"}

// sharedHostsDir prepares the test's shared directory as the example's
// header says an administrator does (group 2000, 2775, a seed file with the
// lines besides the job's: here localhost and site, a site's other hosts,
// enough to make the file longer than the C library's 4 KiB read buffer, so
// that a lookup reads it in more than one read(2)); it returns the directory
// as the nodes see it and as this machine does.
func (b *bed) sharedHostsDir(size int) (node, local string) {
	b.t.Helper()
	node = filepath.Join(localcluster.SharedDir, b.ns)
	local = b.RealNodes[0].HostPath(node) // the same directory on every node
	if err := os.MkdirAll(local, 0o755); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = os.RemoveAll(local) })
	if err := os.Chown(local, 0, sharedHostsGID); err != nil {
		b.t.Fatal(err)
	}
	if err := os.Chmod(local, os.ModeSetgid|0o775); err != nil {
		b.t.Fatal(err)
	}
	var seed bytes.Buffer
	seed.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for i := 0; seed.Len() < size-100; i++ {
		fmt.Fprintf(&seed, "192.0.2.%d\tsite-host-%03d.example.org site-host-%03d\n", i%250+1, i, i)
	}
	if pad := size - seed.Len() - 3; pad > 0 {
		fmt.Fprintf(&seed, "# %s\n", strings.Repeat("-", pad))
	}
	if err := os.WriteFile(filepath.Join(local, "hosts"), seed.Bytes(), 0o644); err != nil {
		b.t.Fatal(err)
	}
	return node, local
}

// applySharedHosts applies examples/batch/shared-hosts/job.yaml with the
// tests' one change to it besides forRealNode: the shared directory is the
// test's own (the namespace's) instead of .../train.
func (b *bed) applySharedHosts(dir string) {
	b.t.Helper()
	b.apply(repoFile(b.t, "examples/batch/shared-hosts/job.yaml"), func(o *unstructured.Unstructured) {
		b.forRealNode(o)
		if o.GetKind() != "Job" {
			return
		}
		vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			hp, ok := v.(map[string]any)["hostPath"].(map[string]any)
			if !ok || hp["path"] != sharedHostsExampleDir {
				b.t.Fatalf("job %s: volume %v is not the example's shared directory", o.GetName(), v)
			}
			hp["path"] = dir
		}
		_ = unstructured.SetNestedSlice(o.Object, vols, "spec", "template", "spec", "volumes")
	})
	b.dumpOnFailure("app=train")
}

// trainIPs maps each of the job's names to its running pod's address.
func trainIPs(pods []corev1.Pod) map[string]string {
	ips := map[string]string{}
	for _, p := range pods {
		ips[p.Labels["role"]+"-"+p.Annotations["batch.kubernetes.io/job-completion-index"]] = p.Status.PodIP
	}
	return ips
}

// onePerNode picks one pod on each node the pods run on.
func onePerNode(pods []corev1.Pod) map[string]corev1.Pod {
	out := map[string]corev1.Pod{}
	for _, p := range pods {
		if _, ok := out[p.Spec.NodeName]; !ok {
			out[p.Spec.NodeName] = p
		}
	}
	return out
}

// resolvesAll checks that getent in pod's trainer (the C library, through
// its /etc/hosts) gives every name of ips its address.
func (b *bed) resolvesAll(pod corev1.Pod, ips map[string]string) {
	b.t.Helper()
	out, err := b.exec(pod.Name, "trainer", append([]string{"getent", "hosts"}, sharedHostsNames...)...)
	if err != nil {
		b.t.Errorf("%s on %s: getent hosts: %v: %s", pod.Name, pod.Spec.NodeName, err, out)
		return
	}
	for name, ip := range ips {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(ip) + `\s+` + regexp.QuoteMeta(name) + `$`).MatchString(out) {
			b.t.Errorf("%s on %s resolves %s wrong (want %s):\n%s", pod.Name, pod.Spec.NodeName, name, ip, out)
		}
	}
}

// leaseHolderPod is the pod named by the hosts Lease's holder identity
// ("<pod>_<uuid>"), "" when none holds it.
func (b *bed) leaseHolderPod(ctx context.Context) (string, error) {
	l, err := b.Client.CoordinationV1().Leases(b.ns).Get(ctx, "train-hosts", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	pod, _, _ := strings.Cut(holder(l), "_")
	return pod, nil
}

// TestExampleSharedHosts runs examples/batch/shared-hosts/job.yaml as
// written (runAsNonRoot, UID 65532, the shared directory group-writable),
// its four pods spread over the three real nodes, one hosts file in the
// directory they all share:
//
//   - a pod on each node resolves every name (getent, the C library);
//   - the file is written by a process without UID 0 (the file's owner);
//   - a reader on every node looks the four names up in a tight loop while
//     the peer set changes 200 times (a pod labelled in and out of the
//     job's selector, its line before theirs so each rewrite moves them):
//     no lookup misses a name or gets a wrong address;
//   - the Lease holder's pod is deleted: another pod's peer-finder takes the
//     Lease within the Lease's 15 s (measured), and the file then maps the
//     name to the replacement pod's new address (no update lost).
func TestExampleSharedHosts(t *testing.T) {
	b := newBed(t)
	b.NeedRealNodes(t, 3)
	// The job's lines start 3970 bytes into the file, so that the C
	// library's second read(2) begins in the middle of them: a rewrite
	// between its two reads would show as a torn line.
	dir, local := b.sharedHostsDir(3970)
	b.applySharedHosts(dir)
	pods := b.waitRunning("app=train", "trainer", 4)
	ips := trainIPs(pods)
	perNode := onePerNode(pods)
	// Spread over every real node: three, or four while a test has added
	// its spare (TestFlockMove grows the bed to four).
	if len(perNode) < 3 {
		t.Errorf("pods on %d nodes, want at least 3 real nodes", len(perNode))
	}
	for _, p := range perNode {
		b.resolvesAll(p, ips)
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s runs without runAsNonRoot", p.Name)
		}
	}
	b.checkWriterNotRoot(filepath.Join(local, "hosts"))

	b.raceReaders(perNode, local, 200)

	// The holder's pod goes, as kubectl delete pod does it (graceful).
	ctx := context.Background()
	gone, err := b.leaseHolderPod(ctx)
	if err != nil || gone == "" {
		t.Fatalf("Lease train-hosts: holder %q, %v", gone, err)
	}
	old, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, gone, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := old.Labels["role"] + "-" + old.Annotations["batch.kubernetes.io/job-completion-index"]
	deleted := time.Now()
	if err := b.Client.CoreV1().Pods(b.ns).Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var next string
	b.WaitFor(t, "another pod holding Lease train-hosts", time.Minute, func(ctx context.Context) (bool, error) {
		next, err = b.leaseHolderPod(ctx)
		return next != "" && next != gone, err
	})
	takeover := time.Since(deleted)
	t.Logf("holder %s deleted: %s took Lease train-hosts after %v", gone, next, takeover.Round(10*time.Millisecond))
	if takeover > 15*time.Second {
		t.Errorf("takeover after %v, more than the Lease's 15 s", takeover)
	}
	// The Job retries the index with a new pod and address; the new holder
	// writes it: the update after the takeover is not lost.
	b.WaitFor(t, "4 trainers running, none of them "+gone, 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := b.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=train"})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.Name != gone && p.DeletionTimestamp == nil && containerRunning("trainer")(&p) {
				pods = append(pods, p)
			}
		}
		return len(pods) == 4, nil
	})
	ips = trainIPs(pods)
	if ips[name] == "" || ips[name] == old.Status.PodIP {
		t.Fatalf("%s's replacement: address %q (the deleted pod had %s)", name, ips[name], old.Status.PodIP)
	}
	line := ips[name] + "\t" + name + "\n"
	b.WaitFor(t, fmt.Sprintf("%q in the shared file", strings.TrimSpace(line)), time.Minute, func(context.Context) (bool, error) {
		content, err := os.ReadFile(filepath.Join(local, "hosts"))
		return bytes.Contains(content, []byte(line)), err
	})
	t.Logf("%s's replacement (%s) in the shared file %v after the holder's deletion", name, ips[name], time.Since(deleted).Round(10*time.Millisecond))
	for _, p := range onePerNode(pods) {
		b.resolvesAll(p, ips)
	}
	content, err := os.ReadFile(filepath.Join(local, "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	if c := bytes.Count(content, []byte("# BEGIN")); c != 1 || !bytes.HasPrefix(content, []byte("127.0.0.1\tlocalhost\n")) {
		t.Errorf("shared hosts file has %d blocks or lost its seed lines:\n%s", c, content)
	}
}

// checkWriterNotRoot: the file peer-finder renamed into place belongs to
// the process that wrote it, which must not be UID 0.
func (b *bed) checkWriterNotRoot(path string) {
	b.t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid == 0 {
		b.t.Errorf("%s: owned by UID 0 after peer-finder's writes (%+v): written by root, or never replaced", path, fi.Sys())
	}
}

// raceReaders runs a reader in one pod on every node (the trainer
// container, through its /etc/hosts): getent for the job's four names in a
// tight loop, each answer compared with the first, while the test changes
// the peer set rewrites times (a pod "churn-0" labelled into the selector
// and out again, each change waited for in the file). No answer may differ.
func (b *bed) raceReaders(perNode map[string]corev1.Pod, local string, rewrites int) {
	b.t.Helper()
	const script = `names="ps-0 worker-0 worker-1 worker-2"
want=$(getent hosts $names) || { echo "first lookup failed"; exit 3; }
touch /etc/flock/shared/reading-$(hostname)
n=0; bad=0
while [ ! -e /etc/flock/shared/stop ]; do
  got=$(getent hosts $names); rc=$?
  n=$((n+1))
  if [ $rc -ne 0 ] || [ "$got" != "$want" ]; then
    bad=$((bad+1))
    [ $bad -le 3 ] && printf 'BAD lookup %d rc=%d:\n%s\n' $n $rc "$got"
  fi
done
echo "lookups $n bad $bad"`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := apps.NewExec(b.Config, b.Client)
	outs := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for node, p := range perNode {
		wg.Go(func() {
			out, err := run(ctx, b.ns, p.Name, "trainer", "sh", "-c", script)
			mu.Lock()
			defer mu.Unlock()
			outs[node] = fmt.Sprintf("%s (err %v)", out, err)
		})
	}
	stop := filepath.Join(local, "stop")
	defer func() {
		if err := os.WriteFile(stop, nil, 0o644); err != nil {
			b.t.Error(err)
		}
		wg.Wait()
		for node, out := range outs {
			b.t.Logf("reader on %s: %s", node, strings.TrimSpace(out))
			if !regexp.MustCompile(`(?m)^lookups [1-9][0-9]* bad 0$`).MatchString(out) {
				b.t.Errorf("reader on %s saw a missing or wrong entry during the rewrites:\n%s", node, out)
			}
		}
	}()
	churn := b.createPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "churn-0", Labels: map[string]string{
			"app": "parked", "role": "churn", "batch.kubernetes.io/job-completion-index": "0"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "pause", Image: localcluster.PauseImage}},
		},
	})
	b.waitPod(churn.Name, "running", 2*time.Minute, containerRunning("pause"))
	// The readers are under way before the first change.
	b.WaitFor(b.t, "a reader on every node", time.Minute, func(context.Context) (bool, error) {
		started, err := filepath.Glob(filepath.Join(local, "reading-*"))
		return len(started) == len(perNode), err
	})
	start := time.Now()
	for i := range rewrites {
		in := i%2 == 0
		app := "parked"
		if in {
			app = "train"
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app)
		if _, err := b.Client.CoreV1().Pods(b.ns).Patch(ctx, churn.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.t.Fatal(err)
		}
		b.WaitFor(b.t, fmt.Sprintf("rewrite %d: churn-0 in the file: %v", i+1, in), time.Minute, func(context.Context) (bool, error) {
			content, err := os.ReadFile(filepath.Join(local, "hosts"))
			return bytes.Contains(content, []byte("\tchurn-0\n")) == in, err
		})
	}
	b.t.Logf("%d rewrites of the shared file in %v", rewrites, time.Since(start).Round(time.Millisecond))
	if err := b.Client.CoreV1().Pods(b.ns).Delete(ctx, churn.Name, metav1.DeleteOptions{}); err != nil {
		b.t.Error(err)
	}
}

// TestSharedHostsMountShapes is why examples/batch/shared-hosts mounts the
// directory: one pod (the example's trainer image, runAsNonRoot) sees one
// shared hosts file three ways, the directory through its /etc/hosts link,
// a hostPath volume of the file and a subPath mount of it. A new file
// renamed over the old one, as peer-finder replaces a file, reaches only
// the first: the two file mounts keep the inode they were given at start,
// so for them a writer can only rewrite the file in place, under readers
// that take no lock.
func TestSharedHostsMountShapes(t *testing.T) {
	b := newBed(t)
	dir, local := b.sharedHostsDir(0)
	file := filepath.Join(dir, "hosts")
	b.createPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shapes"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](sharedHostsGID)},
			Containers: []corev1.Container{{
				Name: "trainer", Image: sharedHostsImage,
				Command:         []string{"sh", "-c", "trap 'exit 143' TERM; sleep 3600 & wait"},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "dir", MountPath: "/etc/flock/shared"},
					{Name: "file", MountPath: "/mnt/file/hosts"},
					{Name: "dir", MountPath: "/mnt/subpath/hosts", SubPath: "hosts"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)}}},
				{Name: "file", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: file, Type: ptr.To(corev1.HostPathFile)}}},
			},
		},
	})
	b.waitPod("shapes", "running", 2*time.Minute, containerRunning("trainer"))
	tmp := filepath.Join(local, ".hosts.new")
	if err := os.WriteFile(tmp, []byte("127.0.0.1\tlocalhost\n10.0.0.7\trenamed-in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(local, "hosts")); err != nil {
		t.Fatal(err)
	}
	for path, sees := range map[string]bool{"/etc/hosts": true, "/mnt/file/hosts": false, "/mnt/subpath/hosts": false} {
		out, err := b.exec("shapes", "trainer", "cat", path)
		if err != nil {
			t.Fatalf("cat %s: %v: %s", path, err, out)
		}
		if got := strings.Contains(out, "renamed-in"); got != sees {
			t.Errorf("%s after a rename into the shared directory: sees the new file %v, want %v:\n%s", path, got, sees, out)
		}
	}
	// And the C library reads the new file through the link.
	if out, err := b.exec("shapes", "trainer", "getent", "hosts", "renamed-in"); err != nil || !strings.Contains(out, "10.0.0.7") {
		t.Errorf("getent hosts renamed-in: %v: %q", err, out)
	}
}
