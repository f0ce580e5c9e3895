package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/localcluster/clustertest"
)

// TestBootstrapExample applies examples/bootstrap/statefulset.yaml and the
// RBAC files it names to a real API server, then runs the init container's
// exact command line in diagnose mode as the example's ServiceAccount: every
// permission those flags need must be granted.
func TestBootstrapExample(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	data, err := os.ReadFile("../../examples/bootstrap/statefulset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	scripts := t.TempDir() // the ConfigMap mounted at /scripts, here
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Service":
			var svc corev1.Service
			mustDecode(t, "statefulset.yaml", doc, &svc)
			_, err = c.Client.CoreV1().Services(ns).Create(t.Context(), &svc, metav1.CreateOptions{})
		case "ConfigMap":
			var cm corev1.ConfigMap
			mustDecode(t, "statefulset.yaml", doc, &cm)
			for name, content := range cm.Data {
				if err := os.WriteFile(filepath.Join(scripts, name), []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, err = c.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), &cm, metav1.CreateOptions{})
		case "StatefulSet":
			var sts appsv1.StatefulSet
			mustDecode(t, "statefulset.yaml", doc, &sts)
			args = sts.Spec.Template.Spec.InitContainers[0].Args
			_, err = c.Client.AppsV1().StatefulSets(ns).Create(t.Context(), &sts, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected kind %q", meta.Kind)
		}
		if err != nil {
			t.Fatalf("create %s: %v", meta.Kind, err)
		}
	}
	if len(args) == 0 {
		t.Fatal("no peer-finder init container found")
	}
	// peer-finder refuses hooks it can never run: point the example's at
	// the scripts written here.
	for i, a := range args {
		args[i] = strings.Replace(a, "=/scripts/", "="+scripts+"/", 1)
	}
	for _, f := range []string{"serviceaccount.yaml", "endpointslice.yaml", "expect-auto.yaml", "cluster-lease.yaml"} {
		applyExample(t, c, ns, f)
	}
	// The StatefulSet controller creates db-0 (it may stay Pending: its
	// volume has no storage class here; diagnose only needs the object).
	p := pf{c: c, ns: ns, pod: "db-0", podUID: "from-the-downward-api",
		args: append(args, "-kubeconfig="+serviceAccountKubeconfig(t, c, ns), "-diagnose")}
	_, out, stderr := p.main(t.Context())
	if strings.Contains(out, "MISSING") || strings.Count(out, "rbac:      ok") != 9 {
		t.Errorf("the example's RBAC does not cover its flags:\n%s\n%s", out, stderr)
	}
}
