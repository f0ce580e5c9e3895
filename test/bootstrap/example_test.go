package bootstrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/localcluster/clustertest"
)

// TestBootstrapExample applies examples/bootstrap to a real API server, once
// as statefulset.yaml with the examples/rbac files it names and once as its
// kustomization (kubectl kustomize: the config/peer-finder components), then
// runs the init container's exact command line in diagnose mode as the
// example's ServiceAccount: every permission those flags need must be
// granted, and the kustomization also grants the optional Events. The
// RoleBinding subjects name no namespace: the API server's authorizer puts
// them in the binding's.
func TestBootstrapExample(t *testing.T) {
	c := clustertest.Get(t)
	files := func(t *testing.T) string {
		var docs []string
		for _, f := range []string{"../../examples/bootstrap/statefulset.yaml", examples + "/serviceaccount.yaml", examples + "/endpointslice.yaml", examples + "/expect-auto.yaml", examples + "/cluster-lease.yaml"} {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(data))
		}
		return strings.Join(docs, "\n---\n")
	}
	kustomize := func(t *testing.T) string {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("no kubectl for kubectl kustomize")
		}
		out, err := exec.Command(kubectl, "kustomize", "../../examples/bootstrap").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl kustomize examples/bootstrap: %v\n%s", err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		name     string
		docs     func(*testing.T) string
		optional int // "optional ok" lines: the Events permissions granted
	}{
		{name: "files", docs: files, optional: 0},
		{name: "kustomize", docs: kustomize, optional: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			args, _ := createExample(t, c, ns, tc.docs(t))
			// The StatefulSet controller creates db-0 (it may stay Pending: its
			// volume has no storage class here; diagnose only needs the object).
			p := pf{c: c, ns: ns, pod: "db-0",
				args: append(args, "-kubeconfig="+serviceAccountKubeconfig(t, c, ns), "-diagnose")}
			_, out, stderr := p.main(t.Context())
			if strings.Contains(out, "MISSING") || strings.Count(out, "rbac:      ok") != 9 || strings.Count(out, "rbac:      optional ok") != tc.optional {
				t.Errorf("the example's RBAC does not cover its flags (want 9 ok, %d optional ok):\n%s\n%s", tc.optional, out, stderr)
			}
		})
	}
}

// createExample creates every object of the multi-document YAML in ns and
// returns the peer-finder init container's arguments, its hooks pointed at
// a local copy of the scripts ConfigMap.
func createExample(t *testing.T, c *clustertest.Cluster, ns, data string) ([]string, string) {
	t.Helper()
	ctx := t.Context()
	var args []string
	scripts := t.TempDir() // the ConfigMap mounted at /scripts, here
	for _, doc := range strings.Split(data, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		var err error
		switch meta.Kind {
		case "":
			continue // only comments
		case "Service":
			var svc corev1.Service
			mustDecode(t, "example", doc, &svc)
			_, err = c.Client.CoreV1().Services(ns).Create(ctx, &svc, metav1.CreateOptions{})
		case "ConfigMap":
			var cm corev1.ConfigMap
			mustDecode(t, "example", doc, &cm)
			for name, content := range cm.Data {
				if err := os.WriteFile(filepath.Join(scripts, name), []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &cm, metav1.CreateOptions{})
		case "StatefulSet":
			var sts appsv1.StatefulSet
			mustDecode(t, "example", doc, &sts)
			args = sts.Spec.Template.Spec.InitContainers[0].Args
			_, err = c.Client.AppsV1().StatefulSets(ns).Create(ctx, &sts, metav1.CreateOptions{})
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			mustDecode(t, "example", doc, &sa)
			_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{})
		case "Role":
			var r rbacv1.Role
			mustDecode(t, "example", doc, &r)
			_, err = c.Client.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			mustDecode(t, "example", doc, &b)
			_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &b, metav1.CreateOptions{})
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
	return args, scripts
}
