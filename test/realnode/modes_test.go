package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/localcluster/clustertest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// scripts are the hooks the tests' pods run, from a ConfigMap, written for
// bash as users' scripts are.
var scripts = map[string]string{
	"on-start.sh": `#!/bin/bash
set -euo pipefail
mkdir -p /work
cat > /work/peers
echo "on-start event=$PEER_FINDER_EVENT self=$PEER_FINDER_SELF"
`,
	"on-change.sh": `#!/bin/bash
set -euo pipefail
peers=$(cat | tr '\n' ' ')
echo "on-change event=$PEER_FINDER_EVENT peers: $peers"
`,
	"fail.sh": `#!/bin/bash
echo "on-start refuses" >&2
exit 1
`,
}

// service creates a headless Service selecting app=name that publishes
// not-ready members (init containers run before readiness), and the scripts.
func (b *bed) service(name string) {
	b.t.Helper()
	ctx := context.Background()
	_, err := b.Client.CoreV1().Services(b.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "peer", Port: 7000}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	_, err = b.Client.CoreV1().ConfigMaps(b.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-scripts"}, Data: scripts,
	}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		b.t.Fatal(err)
	}
}

// rbac applies examples/rbac files for the peer-finder ServiceAccount.
func (b *bed) rbac(files ...string) {
	b.t.Helper()
	for _, f := range append([]string{"serviceaccount.yaml"}, files...) {
		b.apply(repoFile(b.t, "examples/rbac/"+f), b.forRealNode)
	}
}

// statefulSet creates a Parallel StatefulSet "name" of the real node's pods
// with the scripts at /scripts and an emptyDir at /work in every container.
func (b *bed) statefulSet(name string, replicas int32, spec corev1.PodSpec) {
	b.t.Helper()
	spec.Volumes = append(spec.Volumes,
		corev1.Volume{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name + "-scripts"}, DefaultMode: ptr.To[int32](0o755)}}},
		corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	)
	mounts := []corev1.VolumeMount{{Name: "scripts", MountPath: "/scripts"}, {Name: "work", MountPath: "/work"}}
	env := []corev1.EnvVar{
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	for _, cs := range []([]corev1.Container){spec.InitContainers, spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = append(cs[i].VolumeMounts, mounts...)
			cs[i].Env = append(cs[i].Env, env...)
			if cs[i].Image == "" {
				cs[i].Image = Image
			}
		}
	}
	onRealNode(&spec)
	_, err := b.Client.AppsV1().StatefulSets(b.ns).Create(context.Background(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: name, Replicas: ptr.To(replicas),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       spec,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) scale(name string, replicas int32) {
	b.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := b.Client.AppsV1().StatefulSets(b.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) fqdn(pod, svc string) string {
	return fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, svc, b.ns)
}

// app is a main container that prints what on-start wrote, then sleeps.
var app = corev1.Container{
	Name: "app", Command: []string{"/bin/bash", "-c", `echo "app started with peers: $(tr '\n' ' ' < /work/peers)"; exec sleep infinity`},
	SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
}

// TestInitContainerOnStart: peer-finder as an init container with only
// -on-start, from the pod's own resolv.conf (dns) or with in-cluster
// credentials and examples/rbac (endpointslice); the app starts only after
// on-start succeeded, with every member's name.
func TestInitContainerOnStart(t *testing.T) {
	for _, tc := range []struct {
		source string
		args   []string
		rbac   []string
	}{
		{"dns", nil, nil},
		{"endpointslice", []string{"-source=endpointslice", "-include-not-ready"}, []string{"endpointslice.yaml"}},
	} {
		t.Run(tc.source, func(t *testing.T) {
			t.Parallel()
			b := newBed(t)
			b.service("web")
			b.rbac(tc.rbac...)
			init := corev1.Container{
				Name:            "peer-finder",
				Args:            append([]string{"-on-start=/scripts/on-start.sh", "-service=web", "-expect=2"}, tc.args...),
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true)},
			}
			spec := corev1.PodSpec{InitContainers: []corev1.Container{init}, Containers: []corev1.Container{app}}
			if tc.rbac != nil {
				spec.ServiceAccountName = "peer-finder"
			}
			b.statefulSet("web", 2, spec)
			for _, pod := range []string{"web-0", "web-1"} {
				log := b.waitLog(pod, "app", "app started with peers:", 3*time.Minute)
				for _, want := range []string{b.fqdn("web-0", "web"), b.fqdn("web-1", "web")} {
					if !strings.Contains(log, want) {
						t.Errorf("%s started without %s: %q", pod, want, log)
					}
				}
				init := b.logs(pod, "peer-finder", false)
				if !strings.Contains(init, "on-start event=start self="+b.fqdn(pod, "web")) {
					t.Errorf("%s: on-start did not run as itself:\n%s", pod, init)
				}
			}
		})
	}
}

// TestInitContainerFailures: a failing on-start keeps the pod in Init with
// the script's own message in the log (retried, never skipped), and
// -bootstrap-timeout exits 3 so that the kubelet restarts the container.
func TestInitContainerFailures(t *testing.T) {
	b := newBed(t)
	b.service("fail")
	b.service("stuck")
	b.statefulSet("fail", 1, corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "peer-finder", Args: []string{"-on-start=/scripts/fail.sh", "-service=fail"}}},
		Containers:     []corev1.Container{app},
	})
	b.statefulSet("stuck", 1, corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "peer-finder", Args: []string{"-on-start=/scripts/on-start.sh", "-service=stuck", "-expect=3", "-bootstrap-timeout=3s"}}},
		Containers:     []corev1.Container{app},
	})
	log := b.waitLog("fail-0", "peer-finder", "delivery failed", 2*time.Minute)
	if !strings.Contains(log, "on-start refuses") {
		t.Errorf("the failing script's stderr is not in the log:\n%s", log)
	}
	p := b.waitPod("fail-0", "retrying on-start", time.Minute, containerRunning("peer-finder"))
	if p.Status.Phase != corev1.PodPending || status(p, "app") != nil && status(p, "app").State.Running != nil {
		t.Errorf("pod with a failing on-start: phase %s, app %+v; want Pending (Init) without the app", p.Status.Phase, status(p, "app"))
	}

	p = b.waitPod("stuck-0", "restarted after the bootstrap timeout", 2*time.Minute, func(p *corev1.Pod) bool {
		s := status(p, "peer-finder")
		return s != nil && s.RestartCount >= 1 && s.LastTerminationState.Terminated != nil
	})
	if code := status(p, "peer-finder").LastTerminationState.Terminated.ExitCode; code != 3 {
		t.Errorf("bootstrap timeout exit status %d, want 3", code)
	}
}

// TestSidecarOnChange: peer-finder beside the app, as a classic container
// and as a native sidecar (an init container with restartPolicy Always),
// runs on-change for every change; a root sidecar keeps the kubelet-managed
// /etc/hosts current in place, keeping the kubelet's lines.
func TestSidecarOnChange(t *testing.T) {
	b := newBed(t)
	b.service("web")
	b.rbac("endpointslice.yaml")
	args := []string{"-on-change=/scripts/on-change.sh", "-service=web", "-source=endpointslice"}
	b.statefulSet("web", 1, corev1.PodSpec{
		ServiceAccountName: "peer-finder",
		InitContainers: []corev1.Container{{
			Name: "native", Args: args, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
		}},
		Containers: []corev1.Container{
			{Name: "main", Command: []string{"sleep", "infinity"}},
			{Name: "classic", Args: args, SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}},
			{ // the dns source, from the pod's own resolv.conf
				Name: "classic-dns", Args: []string{"-on-change=/scripts/on-change.sh", "-service=web"},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
			},
			{
				Name: "hosts", Args: []string{"-service=web", "-source=endpointslice", "-hosts-file=/etc/hosts"},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), ReadOnlyRootFilesystem: ptr.To(true)},
			},
		},
	})
	self0, self1 := b.fqdn("web-0", "web"), b.fqdn("web-1", "web")
	for _, c := range []string{"native", "classic", "classic-dns"} {
		b.waitLog("web-0", c, "peers: "+self0, 2*time.Minute)
	}
	b.waitPod("web-0", "ready", time.Minute, clustertest.PodReady)
	b.scale("web", 2)
	for _, c := range []string{"native", "classic", "classic-dns"} {
		log := b.waitLog("web-0", c, "on-change event=change peers: "+self0+" "+self1, 2*time.Minute)
		if !strings.Contains(log, "on-change event=start") {
			t.Errorf("%s: no first delivery in\n%s", c, log)
		}
	}
	web1 := b.waitPod("web-1", "ready", 2*time.Minute, clustertest.PodReady)
	var hosts string
	defer func() {
		if t.Failed() {
			t.Logf("web-0 /etc/hosts:\n%s\nlog of the hosts sidecar:\n%s", hosts, b.logs("web-0", "hosts", false))
		}
	}()
	await.Poll{Timeout: time.Minute, Every: time.Second}.Until(t, func() bool {
		hosts, _ = b.exec("web-0", "main", "cat", "/etc/hosts")
		return strings.Contains(hosts, web1.Status.PodIP+"\tweb-1\n") // the default name template, {{.Name}}
	}, "web-1 (%s) in web-0's /etc/hosts", web1.Status.PodIP)
	if !strings.Contains(hosts, "# Kubernetes-managed hosts file") || !strings.Contains(hosts, "\tweb-0.web."+b.ns) {
		t.Errorf("the kubelet's lines are gone from /etc/hosts:\n%s", hosts)
	}
	if out, err := b.exec("web-0", "main", "getent", "hosts", "web-1"); err != nil || !strings.Contains(out, web1.Status.PodIP) {
		t.Errorf("getent hosts web-1 = %q, %v; want %s", out, err, web1.Status.PodIP)
	}
}

// TestHostsBlockSurvivesContainerStarts: the kubelet rewrites a pod's
// /etc/hosts each time one of the pod's containers starts, so a block that a
// native sidecar wrote before the app started is gone when the app starts;
// peer-finder must put it back although the peer set never changes again.
func TestHostsBlockSurvivesContainerStarts(t *testing.T) {
	b := newBed(t)
	b.service("solo")
	b.statefulSet("solo", 1, corev1.PodSpec{
		InitContainers: []corev1.Container{{
			Name: "peer-finder", Args: []string{"-service=solo", "-hosts-file=/etc/hosts"},
			RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), ReadOnlyRootFilesystem: ptr.To(true)},
			// The app starts only once the block is written.
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{"grep", "-q", "BEGIN flock", "/etc/hosts"}}}, PeriodSeconds: 1},
		}},
		Containers: []corev1.Container{{Name: "app", Command: []string{"sleep", "infinity"}}},
	})
	b.waitPod("solo-0", "app running", 2*time.Minute, containerRunning("app"))
	var hosts string
	defer func() {
		if t.Failed() {
			t.Logf("/etc/hosts:\n%s\nsidecar log:\n%s", hosts, b.logs("solo-0", "peer-finder", false))
		}
	}()
	await.Poll{Every: 500 * time.Millisecond}.Until(t, func() bool {
		hosts, _ = b.exec("solo-0", "app", "cat", "/etc/hosts")
		return strings.Contains(hosts, "\tsolo-0\n# END")
	}, "the block back in /etc/hosts after the app started")
}
