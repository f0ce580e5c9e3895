package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The real nodes' label and taint (see localcluster).
const realNodeLabel = "node.flockd.io/real"

// realPods turns the demo's StatefulSet into real pods on the real nodes:
// peer-finder's image as a native sidecar running the demo hooks (from a
// ConfigMap), which append to a file the app container prints, so the app's
// log is the members' deliveries.
func (d *demo) realPods(ctx context.Context, sts *appsv1.StatefulSet) error {
	hooks := map[string]string{}
	for _, name := range []string{"on-start.sh", "on-change.sh"} {
		b, err := os.ReadFile(filepath.Join(d.HookDir, name))
		if err != nil {
			return fmt.Errorf("read demo hook: %w", err)
		}
		hooks[name] = string(b)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-hooks"}, Data: hooks}
	if _, err := d.Client.CoreV1().ConfigMaps(d.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create hooks ConfigMap: %w", err)
	}
	out := corev1.VolumeMount{Name: "out", MountPath: "/demo"}
	sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	sts.Spec.Template.Spec = corev1.PodSpec{
		NodeSelector: map[string]string{realNodeLabel: "true"},
		Tolerations: []corev1.Toleration{{
			Key: realNodeLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}},
		TerminationGracePeriodSeconds: ptr.To[int64](2),
		InitContainers: []corev1.Container{{
			Name: "peer-finder", Image: d.Image, ImagePullPolicy: corev1.PullIfNotPresent,
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Args:          []string{"-service=" + service, "-on-start=/hooks/on-start.sh", "-on-change=/hooks/on-change.sh"},
			Env: []corev1.EnvVar{
				{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				{Name: "FLOCK_DEMO_OUT", Value: "/demo/hooks.log"},
			},
			VolumeMounts:    []corev1.VolumeMount{{Name: "hooks", MountPath: "/hooks"}, out},
			SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
		}},
		Containers: []corev1.Container{{
			Name: "app", Image: d.Image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"/bin/sh", "-c", "touch /demo/hooks.log && exec tail -n +1 -f /demo/hooks.log"},
			VolumeMounts:    []corev1.VolumeMount{out},
			SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
		}},
		Volumes: []corev1.Volume{
			{Name: "hooks", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, DefaultMode: ptr.To[int32](0o755)}}},
			{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	return nil
}

// follow copies the app container's log of pod name, running on node, (its
// hook deliveries) into the member's hooks file, from which tail prints it.
// Called with d.mu held.
func (d *demo) follow(name, node string) error {
	m := &member{name: name, hooks: filepath.Join(d.LogDir, name+".hooks"), exited: make(chan struct{})}
	f, err := os.Create(m.hooks)
	if err != nil {
		return fmt.Errorf("create hook output of %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.exited)
		defer f.Close()
		r, err := d.Client.CoreV1().Pods(d.ns).GetLogs(name, &corev1.PodLogOptions{Container: "app", Follow: true}).Stream(ctx)
		if err != nil {
			if ctx.Err() == nil {
				d.print(name, fmt.Sprintf("cannot follow the log: %v", err))
			}
			return
		}
		defer r.Close()
		_, _ = io.Copy(f, r) // ends when the container stops or we cancel
	}()
	d.members[name] = m
	d.print(name, "pod running on "+node+"; following its deliveries")
	return nil
}

// running reports whether the pod's named container runs.
func running(p *corev1.Pod, container string) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.State.Running != nil {
			return true
		}
	}
	return false
}
