package realnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
)

// onNode pins a real-node pod spec to one node.
func onNode(spec *corev1.PodSpec, node string) {
	onRealNode(spec)
	spec.NodeSelector[corev1.LabelHostname] = node
}

// webPod is a pod on node serving its own name on port 8080 (busybox httpd),
// labelled app=web, reachable as <name>.web.
func (b *bed) webPod(name, node string) *corev1.Pod {
	b.t.Helper()
	spec := corev1.PodSpec{
		Hostname: name, Subdomain: "web",
		Containers: []corev1.Container{{
			Name: "web", Image: Image,
			Command: []string{"/bin/bash", "-c", `mkdir -p /tmp/www && echo "$HOSTNAME" > /tmp/www/name && exec busybox httpd -f -p 8080 -h /tmp/www`},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}},
	}
	onNode(&spec, node)
	b.createPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}, Spec: spec})
	return b.waitPod(name, "running on "+node, 2*time.Minute, containerRunning("web"))
}

// TestRealNodesNetwork: every real node is its own kubelet in its own zone
// with the real-node label and taint, and pods on different nodes reach
// each other by pod IP, by Service and by DNS name; EndpointSlices carry
// each endpoint's node and zone.
func TestRealNodesNetwork(t *testing.T) {
	b := newBed(t)
	nodes := b.NeedRealNodes(t, 3)
	zones := map[string]bool{}
	for _, n := range nodes {
		nd, err := b.Client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zone := nd.Labels["topology.kubernetes.io/zone"]
		if zone != n.Zone || zones[zone] {
			t.Errorf("node %s in zone %q, want its own zone %s", n.Name, zone, n.Zone)
		}
		zones[zone] = true
		if nd.Labels[localcluster.RealNodeLabel] != "true" || !hasTaint(nd, localcluster.RealNodeLabel) {
			t.Errorf("node %s lacks the real-node label or taint: %v %v", n.Name, nd.Labels, nd.Spec.Taints)
		}
		if !strings.HasPrefix(nd.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			t.Errorf("node %s runtime %q", n.Name, nd.Status.NodeInfo.ContainerRuntimeVersion)
		}
	}
	ctx := context.Background()
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-far"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web", "statefulset.kubernetes.io/pod-name": "web-2"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
	} {
		if _, err := b.Client.CoreV1().Services(b.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[string]*corev1.Pod{}
	for i, n := range nodes[:3] {
		name := fmt.Sprintf("web-%d", i)
		pods[name] = b.webPod(name, n.Name)
	}
	// web-far selects web-2 only (by a label the test sets here).
	if _, err := b.Client.CoreV1().Pods(b.ns).Patch(ctx, "web-2", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"statefulset.kubernetes.io/pod-name":"web-2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// bash's /dev/tcp resolves names with the C library, as applications do
	// (the image's static busybox wget crashes in NSS lookups).
	get := func(hostPort string) string {
		host, port, _ := strings.Cut(hostPort, ":")
		out, _ := b.exec("web-0", "web", "/bin/bash", "-c", fmt.Sprintf(
			`exec 3<>/dev/tcp/%s/%s && printf 'GET /name HTTP/1.0\r\n\r\n' >&3 && timeout 5 cat <&3 | tail -1`, host, port))
		return strings.TrimSpace(out)
	}
	for what, url := range map[string]string{
		"pod IP":   pods["web-2"].Status.PodIP + ":8080",
		"Service":  "web-far:80",
		"DNS name": "web-1.web." + b.ns + ".svc.cluster.local:8080",
	} {
		want := "web-2"
		if what == "DNS name" {
			want = "web-1"
		}
		b.WaitFor(t, "web-0 on "+nodes[0].Name+" reaching "+want+" by "+what, time.Minute, func(context.Context) (bool, error) {
			return get(url) == want, nil
		})
	}
	// The EndpointSlice of web names each endpoint's node and zone.
	b.WaitFor(t, "web's EndpointSlice with nodes and zones", time.Minute, func(ctx context.Context) (bool, error) {
		slices, err := b.Client.DiscoveryV1().EndpointSlices(b.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err
		}
		seen := 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				node := ptr.Deref(e.NodeName, "")
				for _, n := range nodes {
					if n.Name == node && ptr.Deref(e.Zone, "") == n.Zone {
						seen++
					}
				}
			}
		}
		return seen == 3, nil
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// TestNodeLocalDirs: a hostPath under NodeLocalDir written on real-1 is not
// at the same path on real-0 (each node has its own directory there), while
// a file under SharedDir is the same on both, as on an NFS mount.
func TestNodeLocalDirs(t *testing.T) {
	b := newBed(t)
	nodes := b.NeedRealNodes(t, 2)
	local := filepath.Join(localcluster.NodeLocalDir, b.ns)
	shared := filepath.Join(localcluster.SharedDir, b.ns)
	for _, n := range nodes {
		t.Cleanup(func() { _ = os.RemoveAll(n.HostPath(local)) })
	}
	t.Cleanup(func() { _ = os.RemoveAll(nodes[0].HostPath(shared)) })
	pod := func(name, node, script string) {
		spec := corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "c", Image: Image, Command: []string{"/bin/bash", "-c", script},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)},
				VolumeMounts:    []corev1.VolumeMount{{Name: "local", MountPath: "/local"}, {Name: "shared", MountPath: "/shared"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "local", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: local, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
				{Name: "shared", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
			},
		}
		onNode(&spec, node)
		b.createPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
		b.waitPod(name, "succeeded", 2*time.Minute, func(p *corev1.Pod) bool {
			if p.Status.Phase == corev1.PodFailed {
				t.Fatalf("pod %s failed: %s", name, b.logs(name, "c", false))
			}
			return p.Status.Phase == corev1.PodSucceeded
		})
	}
	pod("writer", nodes[1].Name, `echo from-real-1 > /local/data && echo from-real-1 > /shared/data`)
	pod("reader", nodes[0].Name, `echo "local: $(cat /local/data 2>&1)"; echo "shared: $(cat /shared/data)"`)
	log := b.logs("reader", "c", false)
	if !strings.Contains(log, "local: cat: can't open '/local/data'") && !strings.Contains(log, "No such file") {
		t.Errorf("real-0 sees real-1's node-local file:\n%s", log)
	}
	if !strings.Contains(log, "shared: from-real-1") {
		t.Errorf("real-0 does not see real-1's file in the shared directory:\n%s", log)
	}
	// On this machine: the file is in real-1's directory, not real-0's, nor
	// at the node path itself.
	if b, err := os.ReadFile(filepath.Join(nodes[1].HostPath(local), "data")); err != nil || string(b) != "from-real-1\n" {
		t.Errorf("real-1's node-local file on this machine: %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(nodes[0].HostPath(local), "data"), filepath.Join(local, "data")} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists (err %v): node-local data leaked", p, err)
		}
	}
}

// faultNode does a node fault through flock-cluster's own code, and starts
// the node again when the test ends if it is still down.
func (b *bed) faultNode(node string, fault localcluster.NodeFault) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := localcluster.FaultNode(ctx, b.StateDir, node, fault); err != nil {
		b.t.Fatalf("node %s %s: %v", fault, node, err)
	}
	if fault != localcluster.NodeStart {
		b.t.Cleanup(func() {
			if err := localcluster.FaultNode(context.Background(), b.StateDir, node, localcluster.NodeStart); err == nil {
				b.waitNode(node, true, 2*time.Minute)
			}
		})
	}
}

// waitNode waits until node's Ready condition is ready.
func (b *bed) waitNode(node string, ready bool, timeout time.Duration) {
	b.t.Helper()
	b.WaitFor(b.t, fmt.Sprintf("node %s Ready=%v", node, ready), timeout, func(ctx context.Context) (bool, error) {
		nd, err := b.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return (c.Status == corev1.ConditionTrue) == ready, nil
			}
		}
		return false, nil
	})
}

// tasks lists the running tasks of a node's containerd ("" if it does not
// answer).
func tasks(n *localcluster.RealNode) string {
	out, err := exec.Command("ctr", "--address="+n.Containerd, "--namespace=k8s.io", "tasks", "list").CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}
