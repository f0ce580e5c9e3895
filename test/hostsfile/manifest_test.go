package hostsfile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/flockd/flock/localcluster/clustertest"
)

// strictCodecs reject unknown and duplicate fields, which typed decoding
// would otherwise drop before the API server's strict validation sees them.
var strictCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)

// manifest is a decoded multi-document YAML file.
type manifest struct {
	path string
	objs []runtime.Object
}

// load decodes every document of path (relative to the repository root)
// strictly into typed objects.
func load(t *testing.T, path string) manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../..", path))
	if err != nil {
		t.Fatal(err)
	}
	m := manifest{path: path}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := strictCodecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, doc)
		}
		m.objs = append(m.objs, obj)
	}
	if len(m.objs) == 0 {
		t.Fatalf("%s: no objects", path)
	}
	return m
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// apply creates the objects (those whose kind or kind/name is among ks, or
// all when ks is empty) in
// ns with strict server-side field validation. RoleBinding subjects in the
// "default" namespace are moved to ns, as the examples tell users to.
func (m manifest) apply(t *testing.T, c *clustertest.Cluster, ns string, ks ...string) {
	t.Helper()
	ctx := context.Background()
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	for _, obj := range m.objs {
		kind := kindOf(obj)
		name := ""
		if a, err := meta.Accessor(obj); err == nil {
			name = a.GetName()
		}
		if len(ks) > 0 && !slices.Contains(ks, kind) && !slices.Contains(ks, kind+"/"+name) {
			continue
		}
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, o, opts)
		case *corev1.Service:
			_, err = c.Client.CoreV1().Services(ns).Create(ctx, o, opts)
		case *corev1.ConfigMap:
			_, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, o, opts)
		case *rbacv1.Role:
			_, err = c.Client.RbacV1().Roles(ns).Create(ctx, o, opts)
		case *rbacv1.RoleBinding:
			for i := range o.Subjects {
				if o.Subjects[i].Namespace == "default" {
					o.Subjects[i].Namespace = ns
				}
			}
			_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, o, opts)
		case *batchv1.Job:
			_, err = c.Client.BatchV1().Jobs(ns).Create(ctx, o, opts)
		case *appsv1.StatefulSet:
			_, err = c.Client.AppsV1().StatefulSets(ns).Create(ctx, o, opts)
		case *appsv1.Deployment:
			_, err = c.Client.AppsV1().Deployments(ns).Create(ctx, o, opts)
		default:
			t.Fatalf("%s: no test support for kind %s", m.path, kind)
		}
		if err != nil {
			t.Fatalf("%s: create %s: %v", m.path, kind, err)
		}
	}
}

func kindOf(obj runtime.Object) string {
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(kinds) == 0 {
		return "?"
	}
	return kinds[0].Kind
}

// podSpec returns the pod template of the workload named name.
func (m manifest) podSpec(t *testing.T, name string) corev1.PodSpec {
	t.Helper()
	for _, obj := range m.objs {
		switch o := obj.(type) {
		case *batchv1.Job:
			if o.Name == name {
				return o.Spec.Template.Spec
			}
		case *appsv1.StatefulSet:
			if o.Name == name {
				return o.Spec.Template.Spec
			}
		case *appsv1.Deployment:
			if o.Name == name {
				return o.Spec.Template.Spec
			}
		}
	}
	t.Fatalf("%s: no workload %s", m.path, name)
	return corev1.PodSpec{}
}

func (m manifest) configMap(name string) *corev1.ConfigMap {
	for _, obj := range m.objs {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == name {
			return cm
		}
	}
	return nil
}

// container returns the container (init or regular) named name.
func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// podRoot is the simulated file system of one pod: a directory per volume
// (shared by the pod's containers, as volumes are) plus the kubelet-managed
// /etc/hosts, which every container of a pod shares too.
type podRoot struct {
	dir  string
	pod  *corev1.Pod
	m    manifest
	kube string // kubeconfig of the pod's ServiceAccount
}

func newPodRoot(t *testing.T, c *clustertest.Cluster, m manifest, pod *corev1.Pod) *podRoot {
	t.Helper()
	r := &podRoot{dir: t.TempDir(), pod: pod, m: m}
	if err := os.MkdirAll(filepath.Join(r.dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.hostsPath(), []byte(kubeletHosts(pod)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(r.dir, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if v.ConfigMap != nil {
			cm := m.configMap(v.ConfigMap.Name)
			if cm == nil {
				t.Fatalf("%s: ConfigMap %s not in the manifest", m.path, v.ConfigMap.Name)
			}
			for k, data := range cm.Data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(data), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	r.kube = kubeconfigFor(t, c, pod.Namespace, sa)
	return r
}

// hostsPath is the pod's /etc/hosts.
func (r *podRoot) hostsPath() string { return filepath.Join(r.dir, "etc", "hosts") }

// mapPath maps a path inside container ctr to the simulated file system.
func (r *podRoot) mapPath(ctr corev1.Container, p string) (string, bool) {
	if p == "/etc/hosts" {
		return r.hostsPath(), true
	}
	mounts := slices.Clone(ctr.VolumeMounts)
	slices.SortFunc(mounts, func(a, b corev1.VolumeMount) int { return len(b.MountPath) - len(a.MountPath) })
	for _, vm := range mounts {
		if p == vm.MountPath || strings.HasPrefix(p, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			return filepath.Join(r.dir, "volumes", vm.Name, strings.TrimPrefix(p, vm.MountPath)), true
		}
	}
	return p, false
}

// command is how the test runs container ctr of the pod: peer-finder's
// argv from the container's command (whose first word must be
// peer-finder) and args, with container paths mapped, plus what a pod
// environment gives for free: -kubeconfig (in-cluster config), -domain
// (resolv.conf) and -hostname (the pod's host name), -metrics-addr on a free
// loopback port; and its environment
// with the downward API resolved.
func (r *podRoot) command(t *testing.T, ctr corev1.Container) (argv, env []string) {
	t.Helper()
	words := slices.Concat(ctr.Command, ctr.Args)
	if len(ctr.Command) > 0 {
		if filepath.Base(ctr.Command[0]) != "peer-finder" {
			t.Fatalf("container %s runs %q, not peer-finder", ctr.Name, ctr.Command[0])
		}
		words = words[1:]
	}
	host := r.pod.Spec.Hostname
	if host == "" {
		host = r.pod.Name
	}
	argv = []string{"-kubeconfig=" + r.kube, "-domain=cluster.local", "-hostname=" + host}
	for _, w := range words {
		if k, _, ok := strings.Cut(w, "="); ok && k == "-metrics-addr" {
			w = k + "=127.0.0.1:0" // each pod has its own network namespace; these processes share one
		} else if k, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(k, "-") {
			if mp, ok := r.mapPath(ctr, v); ok {
				w = k + "=" + mp
			}
		} else if mp, ok := r.mapPath(ctr, w); ok {
			w = mp
		}
		argv = append(argv, w)
	}
	for _, e := range ctr.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			if f.FieldRef == nil {
				t.Fatalf("container %s: env %s: only fieldRef is simulated", ctr.Name, e.Name)
			}
			switch f.FieldRef.FieldPath {
			case "metadata.name":
				v = r.pod.Name
			case "metadata.namespace":
				v = r.pod.Namespace
			case "metadata.uid":
				v = string(r.pod.UID)
			case "status.podIP":
				v = r.pod.Status.PodIP
			default:
				t.Fatalf("container %s: env %s: fieldPath %s not simulated", ctr.Name, e.Name, f.FieldRef.FieldPath)
			}
		}
		env = append(env, e.Name+"="+v)
	}
	return argv, env
}

// run starts container ctr of the pod as a peer-finder process.
func (r *podRoot) run(t *testing.T, ctr corev1.Container) *proc {
	t.Helper()
	argv, env := r.command(t, ctr)
	return start(t, r.pod.Name+"/"+ctr.Name, argv, env)
}
