package controller_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/controller"
)

// grants expands RBAC rules into "verb group/resource" entries.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, v+" "+g+"/"+res)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func readRules(t *testing.T, path string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, obj); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

// TestNamespacedInstall: config/namespaced's Role (namespaced resources)
// and ClusterRole (only cluster-scoped ones) grant exactly what the
// generated ClusterRole grants, and a manager limited to the test's
// namespace, as a ServiceAccount with just that Role and ClusterRole, runs
// a NodePinned Flock with a PodDisruptionBudget to Ready.
func TestNamespacedInstall(t *testing.T) {
	e := newEnv(t, 2)
	var all, cluster rbacv1.ClusterRole
	var role rbacv1.Role
	readRules(t, rolePath, &all)
	readRules(t, "../config/namespaced/role.yaml", &role)
	readRules(t, "../config/namespaced/cluster_role.yaml", &cluster)
	got := slices.Concat(grants(role.Rules), grants(cluster.Rules))
	slices.Sort(got)
	if want := grants(all.Rules); !slices.Equal(got, want) {
		t.Errorf("config/namespaced grants\n%s\nwant (config/rbac/role.yaml)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	scope := func(group, resource string) meta.RESTScopeName {
		gvk, err := e.cl.RESTMapper().KindFor(schema.GroupVersionResource{Group: group, Resource: strings.Split(resource, "/")[0]})
		if err != nil {
			t.Fatalf("%s/%s: %v", group, resource, err)
		}
		m, err := e.cl.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s/%s: %v", group, resource, err)
		}
		return m.Scope.Name()
	}
	for _, r := range cluster.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if s := scope(g, res); s != meta.RESTScopeNameRoot {
					t.Errorf("cluster_role.yaml grants %s/%s, which is namespaced: it belongs in role.yaml", g, res)
				}
			}
		}
	}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if s := scope(g, res); s != meta.RESTScopeNameNamespace {
					t.Errorf("role.yaml grants %s/%s, which is cluster-scoped: a Role cannot grant it", g, res)
				}
			}
		}
	}
	if out, err := exec.Command("kubectl", "kustomize", "../config/namespaced").CombinedOutput(); err != nil {
		t.Errorf("kubectl kustomize config/namespaced: %v\n%s", err, out)
	} else if s := string(out); !strings.Contains(s, "-namespace=$(POD_NAMESPACE)") || strings.Contains(s, "kind: Namespace") ||
		strings.Contains(s, "\n  name: flock-controller\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding") {
		t.Errorf("kubectl kustomize config/namespaced: no -namespace argument, or a Namespace or the all-namespaces ClusterRole left:\n%s", s)
	}
	if t.Failed() {
		return
	}

	e.cfg = e.namespacedConfig(&role, &cluster)
	e.startManagerWith(func(o *controller.ManagerOptions) { o.Namespace = e.ns })
	f := e.flock("nsi", flockv1.ModeNodePinned, 2)
	f.Spec.PodDisruptionBudget = &flockv1.PodDisruptionBudget{}
	if err := e.cl.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	e.waitPinnedReady("nsi", 2)
	if err := e.cl.Get(context.Background(), client.ObjectKeyFromObject(f), &policyv1.PodDisruptionBudget{}); err != nil {
		t.Errorf("budget nsi: %v", err)
	}
}

// namespacedConfig is controllerConfig with role bound in the test's
// namespace and cluster bound cluster-wide, instead of the generated
// ClusterRole.
func (e *env) namespacedConfig(role *rbacv1.Role, cluster *rbacv1.ClusterRole) *rest.Config {
	ctx := context.Background()
	name := "flock-controller-ns-" + e.pool
	role.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: e.ns}
	cluster.ObjectMeta = metav1.ObjectMeta{Name: name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "flock-controller-ns", Namespace: e.ns}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: e.ns}}
	objs := []client.Object{role, cluster, sa,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
	}
	for _, o := range objs {
		if err := e.cl.Create(ctx, o); err != nil {
			e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	e.t.Cleanup(func() {
		_ = e.cl.Delete(context.Background(), cluster)
		_ = e.cl.Delete(context.Background(), objs[4])
	})
	tok, err := e.c.Client.CoreV1().ServiceAccounts(e.ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("token for %s: %v", sa.Name, err)
	}
	cfg := rest.AnonymousClientConfig(e.c.Config)
	cfg.BearerToken = tok.Status.Token
	return cfg
}
