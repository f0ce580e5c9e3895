package hostsfile

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/localcluster/clustertest"
)

// member is one pod of the job as the test plays it.
type member struct {
	name string // ps-0, worker-1, ...
	root *podRoot
	init *proc
}

// TestBatchJob is DESIGN §2 with examples/hostsfile/batch-job.yaml: a
// parameter server and three workers as two Indexed Jobs. Every pod's init
// container lists all four expected names at once, fills them in as pods
// get addresses and exits 0 only when all have one; every pod's sidecar
// then keeps its /etc/hosts right when a failed worker is retried with a
// new IP.
func TestBatchJob(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	m := load(t, "examples/hostsfile/batch-job.yaml")
	m.apply(t, c, ns, "ServiceAccount", "Role", "RoleBinding", "Service")
	const id = "train" // the block is named after -service
	initCtr := container(t, m.podSpec(t, "train-ps"), "peer-finder-init")
	sidecarCtr := container(t, m.podSpec(t, "train-ps"), "peer-finder")

	// The parameter server starts first: its file names the workers before
	// any of them exists, and its init container keeps waiting.
	m.apply(t, c, ns, "Job/train-ps")
	psPod := podsBy(t, c.Client, ns, "app=train,role=ps", 1)[0]
	ps := &member{name: "ps-0", root: newPodRoot(t, c, m, &psPod)}
	ps.init = ps.root.run(t, initCtr)
	eventually(t, "ps-0's file to list every expected name", func() (bool, string) {
		content, err := os.ReadFile(ps.root.hostsPath())
		if err != nil {
			return false, err.Error()
		}
		s := string(content)
		ok := strings.Contains(s, psPod.Status.PodIP+"\tps-0\n")
		for _, w := range []string{"worker-0", "worker-1", "worker-2"} {
			ok = ok && strings.Contains(s, "# no address yet: "+w+"\n")
		}
		return ok, s
	})
	if ps.init.Exited() {
		t.Fatalf("ps-0's init container exited (%d) before the workers had addresses", ps.init.Status())
	}
	if _, outside, err := hostsEntries(ps.root.hostsPath(), id); err != nil || outside != kubeletHosts(&psPod) {
		t.Fatalf("kubelet's lines not kept byte for byte (err %v):\n%q\nwant\n%q", err, outside, kubeletHosts(&psPod))
	}

	m.apply(t, c, ns, "Job/train-worker")
	members := []*member{ps}
	for _, p := range podsBy(t, c.Client, ns, "app=train,role=worker", 3) {
		idx := p.Labels["batch.kubernetes.io/job-completion-index"]
		mb := &member{name: "worker-" + idx, root: newPodRoot(t, c, m, &p)}
		mb.init = mb.root.run(t, initCtr)
		members = append(members, mb)
	}
	want := map[string]string{}
	for _, mb := range members {
		want[mb.name] = mb.root.pod.Status.PodIP
	}
	if len(want) != 4 {
		t.Fatalf("members %v, want ps-0 and worker-0..2", want)
	}
	for _, mb := range members {
		if code := mb.init.WaitWithin(t, wait); code != 0 {
			t.Fatalf("%s: init container exited %d", mb.name, code)
		}
		// Exit 0 only with a complete file, checked right at exit.
		got, outside, err := hostsEntries(mb.root.hostsPath(), id)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("%s: at init exit the file maps %v (err %v), want %v", mb.name, got, err, want)
		}
		if outside != kubeletHosts(mb.root.pod) {
			t.Errorf("%s: kubelet's lines changed:\n%q", mb.name, outside)
		}
	}

	// The sidecars take over; a worker is retried as a new pod.
	for _, mb := range members {
		mb.root.run(t, sidecarCtr)
	}
	victim := members[2] // worker-1
	if victim.name != "worker-1" {
		t.Fatalf("members out of order: %s", victim.name)
	}
	// Its containers fail (kwok turns a deleted pod Succeeded, which a Job
	// counts as done; on a real node a killed container fails): the Job
	// retries the index as a new pod with a new IP.
	c.FailPod(t, ns, victim.root.pod.Name)
	var retried corev1.Pod
	eventually(t, "the Job to retry worker-1 as a new pod", func() (bool, string) {
		l, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: "app=train,role=worker,batch.kubernetes.io/job-completion-index=1"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range l.Items {
			if p.UID != victim.root.pod.UID && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				retried = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods", len(l.Items))
	})
	if retried.Status.PodIP == victim.root.pod.Status.PodIP {
		t.Fatalf("the retried pod got the old IP %s again; the test cannot tell the files apart", retried.Status.PodIP)
	}
	want["worker-1"] = retried.Status.PodIP
	for _, mb := range members {
		if mb != victim {
			waitHosts(t, mb.root.hostsPath(), id, want)
		}
	}
	// The retried pod's own init container sees the whole job at once.
	again := &member{name: "worker-1", root: newPodRoot(t, c, m, &retried)}
	if code := again.root.run(t, initCtr).WaitWithin(t, wait); code != 0 {
		t.Fatalf("retried worker-1: init container exited %d", code)
	}
	if got, _, err := hostsEntries(again.root.hostsPath(), id); err != nil || !maps.Equal(got, want) {
		t.Fatalf("retried worker-1: file maps %v (err %v), want %v", got, err, want)
	}
}
