package apps

import (
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The real nodes are processes of this machine, so the campaign (root)
// can reach into a running container without an exec: its processes are
// in its cgroup, named by its id, and /proc/PID/root is its file system as
// its processes see it, mounts included.

// containerProcs are the files listing a container's processes, by its
// id: containerd's cgroup parent k8s.io, cgroup v1 and v2.
var containerProcs = []string{
	"/sys/fs/cgroup/pids/k8s.io/%s/cgroup.procs",
	"/sys/fs/cgroup/k8s.io/%s/cgroup.procs",
}

// ContainerRoot returns the running container id's root, as this machine
// sees it: /proc/PID/root of its first process.
func ContainerRoot(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return "", fmt.Errorf("container id %q", id)
	}
	for _, f := range containerProcs {
		b, err := os.ReadFile(fmt.Sprintf(f, id))
		if err != nil {
			continue
		}
		if pid, _, _ := strings.Cut(string(b), "\n"); pid != "" {
			return "/proc/" + pid + "/root", nil
		}
		return "", fmt.Errorf("container %.12s has no process", id)
	}
	return "", fmt.Errorf("container %.12s: no cgroup on this machine", id)
}

// ContainerIDs are the running containers' ids of pods not being deleted,
// by pod and container name.
func ContainerIDs(pods []corev1.Pod) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, s := range p.Status.ContainerStatuses {
			_, id, ok := strings.Cut(s.ContainerID, "://")
			if !ok || s.State.Running == nil {
				continue
			}
			if out[p.Name] == nil {
				out[p.Name] = map[string]string{}
			}
			out[p.Name][s.Name] = id
		}
	}
	return out
}
