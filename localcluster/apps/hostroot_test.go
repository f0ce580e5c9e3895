package apps

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestContainerIDs(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	now := metav1.Now()
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "galera-0"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "mariadb", ContainerID: "containerd://aaa", State: running},
			{Name: "peer-finder", ContainerID: "containerd://bbb", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}},
			{Name: "sidecar"}, // not created yet
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "galera-1", DeletionTimestamp: &now}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "mariadb", ContainerID: "containerd://ccc", State: running},
		}}},
	}
	want := map[string]map[string]string{"galera-0": {"mariadb": "aaa"}}
	if diff := cmp.Diff(want, ContainerIDs(pods)); diff != "" {
		t.Errorf("ContainerIDs (-want +got):\n%s", diff)
	}
}

func TestContainerRoot(t *testing.T) {
	dir := t.TempDir()
	defer func(old []string) { containerProcs = old }(containerProcs)
	containerProcs = []string{filepath.Join(dir, "v1", "%s", "cgroup.procs"), filepath.Join(dir, "v2", "%s", "cgroup.procs")}
	for id, procs := range map[string]string{"running": "4242\n4300\n", "ended": ""} {
		if err := os.MkdirAll(filepath.Join(dir, "v2", id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "v2", id, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if root, err := ContainerRoot("running"); root != "/proc/4242/root" || err != nil {
		t.Errorf("ContainerRoot(running) = %q, %v; want /proc/4242/root", root, err)
	}
	for _, id := range []string{"ended", "unknown", "", "../running"} {
		if root, err := ContainerRoot(id); err == nil {
			t.Errorf("ContainerRoot(%q) = %q; want an error", id, root)
		}
	}
}
