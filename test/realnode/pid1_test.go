package realnode

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// pid1Pod is a pod whose container is peer-finder -- cmd: peer-finder is pid
// 1 and starts cmd after the first delivery.
func pid1Pod(name string, cmd string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "pid1"}},
		Spec: corev1.PodSpec{
			Hostname: name, Subdomain: "pid1",
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{
				Name: "app", Image: Image,
				Args: []string{"-service=pid1", "-kill-timeout=5s", "--", "/bin/bash", "-c", cmd},
				Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
			}},
		},
	}
}

// TestPid1: peer-finder as the container's pid 1 with -- CMD: the kubelet's
// SIGTERM reaches the app, orphans are reaped, the app's exit status is the
// container's.
func TestPid1(t *testing.T) {
	b := newBed(t)
	b.service("pid1")

	b.rbac("endpointslice.yaml")
	es := pid1Pod("exits-es", `echo started; exit 9`)
	es.Spec.ServiceAccountName = "peer-finder"
	es.Spec.Containers[0].Args = append([]string{"-source=endpointslice", "-include-not-ready"}, es.Spec.Containers[0].Args...)
	b.createPod(pid1Pod("exits", `echo started; exit 7`))
	b.createPod(es)
	for pod, want := range map[string]int32{"exits": 7, "exits-es": 9} {
		p := b.waitPod(pod, "terminated", 2*time.Minute, func(p *corev1.Pod) bool {
			s := status(p, "app")
			return s != nil && s.State.Terminated != nil
		})
		if code := status(p, "app").State.Terminated.ExitCode; code != want {
			t.Errorf("%s: container exit status %d, want the app's %d", pod, code, want)
		}
		if log := b.logs(pod, "app", false); !strings.Contains(log, "started") {
			t.Errorf("%s: the app never ran:\n%s", pod, log)
		}
	}

	// Orphans: each (sleep &) subshell exits at once, leaving its sleep to
	// pid 1, which must reap it when it exits.
	b.createPod(pid1Pod("signals", `trap 'echo "app got TERM"; exit 0' TERM
for i in 1 2 3 4 5 6; do (sleep 0.2 &); done
echo ready; while true; do sleep 0.1; done`))
	b.waitLog("signals", "app", "ready", 2*time.Minute)
	var zombies string
	b.WaitFor(t, "orphans reaped", 30*time.Second, func(context.Context) (bool, error) {
		out, err := b.exec("signals", "app", "/bin/bash", "-c", `cat /proc/[0-9]*/stat 2>/dev/null | grep -c ') Z ' || true`)
		zombies = strings.TrimSpace(out)
		return err == nil && zombies == "0", nil
	})

	stream, err := b.Client.CoreV1().Pods(b.ns).GetLogs("signals", &corev1.PodLogOptions{Container: "app", Follow: true}).Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	start := time.Now()
	if err := b.Client.CoreV1().Pods(b.ns).Delete(context.Background(), "signals", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "app got TERM") {
				got <- true
				return
			}
		}
		got <- false
	}()
	select {
	case ok := <-got:
		if !ok {
			t.Error("the app's log ended without its TERM trap running")
		}
	case <-time.After(25 * time.Second):
		t.Error("the app did not get the kubelet's SIGTERM within 25s")
	}
	b.WaitFor(t, "pod gone", 40*time.Second, func(ctx context.Context) (bool, error) {
		_, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, "signals", metav1.GetOptions{})
		return err != nil, nil
	})
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("pod took %s to stop: the grace period (30s) ran out instead of a clean exit", d.Round(time.Second))
	}
}
