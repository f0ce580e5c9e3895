package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder"
)

// TestDeploymentWithoutService runs peer-finder for a pod of a Deployment
// with no Service at all (issue 13 #6): -source=pods without -service names
// the peers by IP, $POD_IP identifies this member, the hook reads
// -format=lines-ip and gets PEER_FINDER_SELF_IP, and the namespace comes
// from the service account's namespace file.
func TestDeploymentWithoutService(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	replicas := int32(3)
	labels := map[string]string{"app": "api"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}}},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	c.WaitFor(t, "3 running pods of api", wait, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=api"})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				pods = append(pods, p)
			}
		}
		return len(pods) == 3, nil
	})
	var want []string
	for _, p := range pods {
		want = append(want, fmt.Sprintf("%s.%s.pod.%s %s", strings.ReplaceAll(p.Status.PodIP, ".", "-"), ns, c.Domain, p.Status.PodIP))
	}
	slices.Sort(want)
	self := pods[0]

	dir := t.TempDir()
	script := filepath.Join(dir, "hook.sh")
	body := "#!/bin/sh\ncat > " + filepath.Join(dir, "stdin") + "\nprintf '%s|%s' \"$PEER_FINDER_SELF\" \"$PEER_FINDER_SELF_IP\" > " + filepath.Join(dir, "self") + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	saNamespace := filepath.Join(dir, "namespace")
	if err := os.WriteFile(saNamespace, []byte(ns+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := pf{c: c, ns: ns, pod: self.Name, podIP: self.Status.PodIP, args: []string{"-kubeconfig=" + c.Kubeconfig,
		"-source=pods", "-selector=app=api", "-min-peers=3", "-format=lines-ip", "-trailing-newline", "-on-start=/bin/sh " + script}}
	env := p.env()
	getenv := env.Getenv
	env.Getenv = func(k string) string { // no POD_NAMESPACE: the file must be read
		if k == "POD_NAMESPACE" {
			return ""
		}
		return getenv(k)
	}
	env.ServiceAccountNamespace = func() ([]byte, error) { return os.ReadFile(saNamespace) }
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	var stdout, stderr strings.Builder
	if code := peerfinder.Main(ctx, p.argv(), env, &stdout, &stderr); code != peerfinder.ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(dir, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n"); !slices.Equal(lines, want) {
		t.Errorf("hook stdin:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	selfEnv, _ := os.ReadFile(filepath.Join(dir, "self"))
	wantSelf := fmt.Sprintf("%s.%s.pod.%s|%s", strings.ReplaceAll(self.Status.PodIP, ".", "-"), ns, c.Domain, self.Status.PodIP)
	if string(selfEnv) != wantSelf {
		t.Errorf("PEER_FINDER_SELF|PEER_FINDER_SELF_IP = %q, want %q", selfEnv, wantSelf)
	}
}
