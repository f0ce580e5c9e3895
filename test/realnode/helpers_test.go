// Package realnode tests flock's images in real containers on the local
// cluster's real node (kubelet, containerd, runc, CNI): what users run, with
// the kubelet's /etc/hosts, the pod's resolv.conf and in-cluster credentials.
package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/apps"
	"github.com/flockd/flock/localcluster/clustertest"
)

// Image is peer-finder's image as "make images" builds it, by its alias
// dev (the same image as the versioned name the examples use).
const Image = "ghcr.io/flockd/peer-finder:dev"

// bed is one test's cluster and namespace with the real nodes required.
type bed struct {
	*clustertest.Cluster
	t  *testing.T
	ns string
}

// newBed needs at least one real node; tests of more call NeedRealNodes.
func newBed(t *testing.T) *bed {
	t.Helper()
	c := clustertest.Get(t)
	c.NeedRealNode(t)
	return &bed{Cluster: c, t: t, ns: c.Namespace(t)}
}

// realNode is the real node called name; the test fails if there is none.
func (b *bed) realNode(name string) *localcluster.RealNode {
	b.t.Helper()
	for _, n := range b.RealNodes {
		if n.Name == name {
			return n
		}
	}
	b.t.Fatalf("%q is not a real node", name)
	return nil
}

// ctr runs ctr against every real node's containerd.
func (b *bed) ctr(args ...string) {
	b.t.Helper()
	for _, n := range b.RealNodes {
		out, err := exec.Command("ctr", append([]string{"--address=" + n.Containerd, "--namespace=k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			b.t.Fatalf("ctr %s on %s: %v: %s", strings.Join(args, " "), n.Name, err, out)
		}
	}
}

// onRealNode makes a pod spec land on a real node (keeping any other node
// selector it has), with the image present there (never pulled: nothing
// can be).
func onRealNode(spec *corev1.PodSpec) {
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[localcluster.RealNodeLabel] = "true"
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: localcluster.RealNodeLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
	})
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if cs[i].ImagePullPolicy == "" {
				cs[i].ImagePullPolicy = corev1.PullNever
			}
		}
	}
}

// createPod creates pod on the real node.
func (b *bed) createPod(pod *corev1.Pod) *corev1.Pod {
	b.t.Helper()
	onRealNode(&pod.Spec)
	p, err := b.Client.CoreV1().Pods(b.ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		b.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return p
}

// waitPod waits until cond holds for the named pod, failing with its last
// status after timeout.
func (b *bed) waitPod(name, what string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	b.t.Helper()
	var last *corev1.Pod
	b.WaitFor(b.t, fmt.Sprintf("pod %s %s", name, what), timeout, func(ctx context.Context) (bool, error) {
		p, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = p
		return cond(p), nil
	})
	return last
}

// waitRunning waits until n pods of selector run container, and returns them.
func (b *bed) waitRunning(selector, container string, n int) []corev1.Pod {
	b.t.Helper()
	var running []corev1.Pod
	b.WaitFor(b.t, fmt.Sprintf("%d pods %s with %s running", n, selector, container), 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := b.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		running = running[:0]
		for i := range pods.Items {
			if containerRunning(container)(&pods.Items[i]) {
				running = append(running, pods.Items[i])
			}
		}
		return len(running) == n, nil
	})
	return running
}

func containerRunning(name string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		for _, s := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
			if s.Name == name && s.State.Running != nil {
				return true
			}
		}
		return false
	}
}

// status is the named container's status (init or not), or nil.
func status(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, s := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
		if s.Name == name {
			return &s
		}
	}
	return nil
}

// logs returns a container's log (previous: of its last terminated run).
func (b *bed) logs(pod, container string, previous bool) string {
	b.t.Helper()
	raw, err := b.Client.CoreV1().Pods(b.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(context.Background())
	if err != nil {
		b.t.Fatalf("logs of %s/%s: %v", pod, container, err)
	}
	return string(raw)
}

// waitApp polls judge every `every` until it returns nil (an application's
// own view of its health), failing the test after timeout with what and
// judge's last error; when the wait fails (judge may also fail the test at
// once, on a split brain) dump logs what the pods said.
func (b *bed) waitApp(what string, timeout, every time.Duration, dump func(), judge func() error) {
	b.t.Helper()
	healthy := false
	defer func() {
		if !healthy {
			dump()
		}
	}()
	await.Poll{Timeout: timeout, Every: every}.Check(b.t, judge, "%s", what)
	healthy = true
}

// dumpOnFailure logs, when the test has failed, every container's log of
// the pods matching selector: what each peer-finder saw and wrote.
func (b *bed) dumpOnFailure(selector string) {
	b.t.Cleanup(func() {
		if !b.t.Failed() {
			return
		}
		pods, err := b.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			b.t.Logf("list %s: %v", selector, err)
			return
		}
		for _, p := range pods.Items {
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				raw, err := b.Client.CoreV1().Pods(b.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(context.Background())
				b.t.Logf("log of %s/%s (err %v):\n%s", p.Name, c.Name, err, raw)
			}
		}
	})
}

// waitLog waits until the container's log contains want and returns it.
func (b *bed) waitLog(pod, container, want string, timeout time.Duration) string {
	b.t.Helper()
	var last string
	b.WaitFor(b.t, fmt.Sprintf("%q in the log of %s/%s", want, pod, container), timeout, func(ctx context.Context) (bool, error) {
		raw, err := b.Client.CoreV1().Pods(b.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		if err != nil {
			return false, nil // not started yet
		}
		last = string(raw)
		return strings.Contains(last, want), nil
	})
	return last
}

// exec runs cmd in a container through the apiserver and the kubelet, as
// kubectl exec does, for at most a minute.
func (b *bed) exec(pod, container string, cmd ...string) (string, error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return apps.NewExec(b.Config, b.Client)(ctx, b.ns, pod, container, cmd...)
}

// apply creates the objects of a multi-document YAML manifest in the test's
// namespace, after edit has had its say on each one.
func (b *bed) apply(manifest []byte, edit func(*unstructured.Unstructured)) []*unstructured.Unstructured {
	b.t.Helper()
	var out []*unstructured.Unstructured
	b.eachObject(manifest, edit, func(ri dynamic.ResourceInterface, obj *unstructured.Unstructured) {
		created, err := ri.Create(context.Background(), obj, metav1.CreateOptions{})
		if err != nil {
			b.t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		out = append(out, created)
	})
	return out
}

// eachObject decodes a multi-document manifest and calls do with each
// object, after edit (if not nil), and the client of its resource: in the
// test's namespace for namespaced objects without one of their own.
func (b *bed) eachObject(manifest []byte, edit func(*unstructured.Unstructured), do func(dynamic.ResourceInterface, *unstructured.Unstructured)) {
	b.t.Helper()
	dc, err := dynamic.NewForConfig(b.Config)
	if err != nil {
		b.t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			b.t.Fatalf("decode manifest: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if edit != nil {
			edit(&obj)
		}
		// Discovery again per object: a CRD applied before serves a new
		// kind the next objects may use.
		groups, err := restmapper.GetAPIGroupResources(b.Client.Discovery())
		if err != nil {
			b.t.Fatal(err)
		}
		gvk := obj.GroupVersionKind()
		m, err := restmapper.NewDiscoveryRESTMapper(groups).RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if err != nil {
			b.t.Fatalf("map %s: %v", gvk, err)
		}
		ri := dynamic.ResourceInterface(dc.Resource(m.Resource))
		if m.Scope.Name() == "namespace" {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(b.ns)
			}
			ri = dc.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		do(ri, &obj)
	}
}

// repoFile reads a file of the repository.
func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := localcluster.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// repoPath is the absolute path of a file or directory of the repository.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := localcluster.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// restartSet is Kubernetes' e2e restart of a StatefulSet
// (e2estatefulset.Restart, run by its app tests between a write through
// member 0 and a read on member 2): scaled to 0, every pod of selector
// gone, scaled back to n. It returns how long the pods took to go.
func (b *bed) restartSet(name, selector string, n int32) time.Duration {
	b.t.Helper()
	start := time.Now()
	b.scale(name, 0)
	b.waitPods(selector, 0)
	gone := time.Since(start)
	b.scale(name, n)
	return gone
}

// dumpContainers logs the containers' logs of pods, the previous run's
// and the current one's, the last tail lines of each (0: all).
func (b *bed) dumpContainers(pods []string, tail int64, containers ...string) {
	for _, p := range pods {
		for _, c := range containers {
			for _, prev := range []bool{true, false} {
				o := &corev1.PodLogOptions{Container: c, Previous: prev}
				if tail > 0 {
					o.TailLines = &tail
				}
				raw, err := b.Client.CoreV1().Pods(b.ns).GetLogs(p, o).DoRaw(context.Background())
				if err == nil {
					b.t.Logf("--- %s/%s (previous %v):\n%s", p, c, prev, raw)
				}
			}
		}
	}
}

// killInPod kills the processes named comm of pod's containers with
// SIGKILL from the host, as a crash would (the real nodes' containers are
// this machine's processes); a pod's containers carry POD_NAMESPACE and
// POD_NAME in their environment. At least one must be found.
func (b *bed) killInPod(pod, comm string) {
	b.t.Helper()
	b.signalInPod(pod, comm, syscall.SIGKILL)
}

// signalInPod sends sig to every process comm of pod (found by its
// environment, from the host).
func (b *bed) signalInPod(pod, comm string, sig syscall.Signal) {
	b.t.Helper()
	procs, err := procfs.AllProcs()
	if err != nil {
		b.t.Fatal(err)
	}
	killed := 0
	for _, p := range procs {
		if c, err := p.Comm(); err != nil || c != comm {
			continue
		}
		env, err := p.Environ()
		if err != nil || !slices.Contains(env, "POD_NAMESPACE="+b.ns) || !slices.Contains(env, "POD_NAME="+pod) {
			continue
		}
		if err := syscall.Kill(p.PID, sig); err != nil {
			b.t.Fatalf("signal %v to %s (pid %d) of %s: %v", sig, comm, p.PID, pod, err)
		}
		killed++
	}
	if killed == 0 {
		b.t.Fatalf("no process %s in pod %s", comm, pod)
	}
}

// deleteAndWait deletes pod with opts and waits until it is gone.
func (b *bed) deleteAndWait(pod string, opts metav1.DeleteOptions) {
	b.t.Helper()
	if err := b.Client.CoreV1().Pods(b.ns).Delete(context.Background(), pod, opts); err != nil {
		b.t.Fatal(err)
	}
	b.WaitFor(b.t, pod+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
