package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
)

// TestOctopusSharedHostsFile is the octopus pattern for real: a two-role job
// (ps x1, worker x2) whose pods all mount one hosts file of the node at
// /etc/hosts (as the seed's NFS file), written by one peer-finder that holds
// the Lease; every pod's init container waits until the file names every
// member, and the trainers resolve <role>-<index> with the C library.
func TestOctopusSharedHostsFile(t *testing.T) {
	b := newBed(t)
	b.service("train")
	b.rbac("pods.yaml", "hosts-lease.yaml")
	// The file is in the directory every real node shares, as an NFS
	// mount would be: the job's pods may land on any of them.
	hosts := filepath.Join(localcluster.SharedDir, b.ns, "hosts")
	local := b.RealNodes[0].HostPath(hosts) // the same file on every node
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(local)) })
	if err := os.WriteFile(local, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"-service=train", "-source=pods", "-selector=app=train", "-include-not-ready",
		"-hosts-file=/etc/hosts", "-hosts-lease=hosts-writer",
		`-hosts-name-template={{index .Labels "role"}}-{{.Index}}`, "-hosts-expect=ps=1,worker=2",
	}
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	}
	root := &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), ReadOnlyRootFilesystem: ptr.To(true)}
	mount := []corev1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts"}}
	job := func(role string, n int32) *batchv1.Job {
		spec := corev1.PodSpec{
			Subdomain: "train", ServiceAccountName: "peer-finder", RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{
				{Name: "wait", Image: Image, Args: append(append([]string{}, args...), "-wait-for-all", "-once", "-bootstrap-timeout=5m"),
					Env: env, SecurityContext: root, VolumeMounts: mount},
				{Name: "peer-finder", Image: Image, Args: args, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Env: env, SecurityContext: root, VolumeMounts: mount},
			},
			Containers: []corev1.Container{{
				Name: "trainer", Image: Image, VolumeMounts: mount,
				Command: []string{"/bin/bash", "-c", `for n in ps-0 worker-0 worker-1; do echo "resolved $(getent hosts $n)"; done; echo lookups-done; exec sleep infinity`},
			}},
			Volumes: []corev1.Volume{{Name: "hosts", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: hosts, Type: ptr.To(corev1.HostPathFile)}}}},
		}
		onRealNode(&spec)
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "train-" + role},
			Spec: batchv1.JobSpec{
				CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To(n), Parallelism: ptr.To(n),
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train", "role": role}}, Spec: spec},
			},
		}
	}
	for role, n := range map[string]int32{"ps": 1, "worker": 2} {
		if _, err := b.Client.BatchV1().Jobs(b.ns).Create(context.Background(), job(role, n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b.dumpOnFailure("app=train")
	pods := b.waitRunning("app=train", "trainer", 3)
	want := map[string]string{}
	for _, p := range pods {
		want[p.Labels["role"]+"-"+p.Annotations["batch.kubernetes.io/job-completion-index"]] = p.Status.PodIP
	}
	for _, p := range pods {
		// The whole loop's output: its first line alone is an unfinished log.
		log := b.waitLog(p.Name, "trainer", "lookups-done", time.Minute)
		for name, ip := range want {
			if !strings.Contains(log, fmt.Sprintf("resolved %s", ip)) || !strings.Contains(log, name) {
				t.Errorf("%s resolved %s wrong (want %s):\n%s", p.Name, name, ip, log)
			}
		}
	}
	// One writer: exactly one peer-finder holds the Lease, and the shared
	// file has one block.
	content, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(string(content), "# BEGIN"); c != 1 || !strings.HasPrefix(string(content), "127.0.0.1\tlocalhost\n") {
		t.Errorf("shared hosts file has %d blocks or lost its foreign line:\n%s", c, content)
	}
	lease, err := b.Client.CoordinationV1().Leases(b.ns).Get(context.Background(), "hosts-writer", metav1.GetOptions{})
	if err != nil || holder(lease) == "" {
		t.Errorf("hosts-writer Lease: %v, holder %q", err, holder(lease))
	}
}
