package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder"
)

const examples = "../../examples/rbac"

// applyExample creates the objects of an examples/rbac file in ns, binding
// to the ServiceAccount in ns, and returns the Role it created (if any).
func applyExample(t *testing.T, c *clustertest.Cluster, ns, file string) *rbacv1.Role {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, file))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var role *rbacv1.Role
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		switch meta.Kind {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			mustDecode(t, file, doc, &sa)
			_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{})
		case "Role":
			var r rbacv1.Role
			mustDecode(t, file, doc, &r)
			role, err = c.Client.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			mustDecode(t, file, doc, &b) // subjects without a namespace: the binding's
			_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &b, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: unexpected kind %q", file, meta.Kind)
		}
		if err != nil {
			t.Fatalf("%s: create %s: %v", file, meta.Kind, err)
		}
	}
	return role
}

func mustDecode(t *testing.T, file, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount peer-finder in ns.
func serviceAccountKubeconfig(t *testing.T, c *clustertest.Cluster, ns string) string {
	t.Helper()
	expiry := int64(3600)
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "peer-finder",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData, CertificateAuthority: c.Config.CAFile}
	kc.AuthInfos["peer-finder"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["peer-finder"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "peer-finder", Namespace: ns}
	kc.CurrentContext = "peer-finder"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// permission is one verb of a Role rule, as diagnose prints it.
type permission struct {
	rule int
	verb string
	text string // e.g. "get leases.coordination.k8s.io/db-cluster"
}

func permissions(r *rbacv1.Role) []permission {
	var out []permission
	for i, rule := range r.Rules {
		for _, v := range rule.Verbs {
			text := v + " " + rule.Resources[0]
			if g := rule.APIGroups[0]; g != "" {
				text += "." + g
			}
			if len(rule.ResourceNames) > 0 {
				text += "/" + rule.ResourceNames[0]
			}
			out = append(out, permission{rule: i, verb: v, text: text})
		}
	}
	return out
}

// without returns the role's rules with one verb taken away.
func without(r *rbacv1.Role, p permission) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for i, rule := range r.Rules {
		rule = *rule.DeepCopy()
		if i == p.rule {
			rule.Verbs = slices.DeleteFunc(rule.Verbs, func(v string) bool { return v == p.verb })
			if len(rule.Verbs) == 0 {
				continue
			}
		}
		rules = append(rules, rule)
	}
	return rules
}

func setRules(t *testing.T, c *clustertest.Cluster, ns string, role *rbacv1.Role, rules []rbacv1.PolicyRule) {
	t.Helper()
	r, err := c.Client.RbacV1().Roles(ns).Get(t.Context(), role.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Rules = rules
	if _, err := c.Client.RbacV1().Roles(ns).Update(t.Context(), r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRBACExamples runs peer-finder as a ServiceAccount that has exactly
// one examples/rbac file applied, against the real API server:
//   - with the file, a real init-mode run delivers and diagnose finds nothing missing;
//   - with any one verb taken away, diagnose exits 1 naming that permission;
//   - with the Role emptied, a real run logs a forbidden line naming what
//     was refused and keeps retrying until -bootstrap-timeout.
func TestRBACExamples(t *testing.T) {
	c := clustertest.Get(t)
	cases := []struct {
		file   string
		args   []string
		podUID bool
	}{
		{file: "endpointslice.yaml", args: []string{"-source=endpointslice", "-include-not-ready"}},
		{file: "pods.yaml", args: []string{"-source=pods", "-selector=app=web", "-include-not-ready"}},
		{file: "pods-selector-from-self.yaml", args: []string{"-source=pods", "-selector-from-self=app", "-include-not-ready"}},
		{file: "expect-auto.yaml", args: []string{"-source=dns", "-expect=auto"}},
		{file: "cluster-lease.yaml", args: []string{"-source=dns", "-cluster-lease=db-cluster"}, podUID: true},
	}
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			ns := c.Namespace(t)
			fixture.HeadlessService(t, c.Client, ns, true)
			fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{})
			web0 := fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
			fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
			applyExample(t, c, ns, "serviceaccount.yaml")
			role := applyExample(t, c, ns, tc.file)
			args := append([]string{"-kubeconfig=" + serviceAccountKubeconfig(t, c, ns)}, tc.args...)
			if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-expect") }) {
				// Both pods run, but the EndpointSlice (and CoreDNS) may not
				// list web-1 yet: wait for both, as a real bootstrap would.
				args = append(args, "-expect=2")
			}
			p := pf{c: c, ns: ns, pod: "web-0", args: args}
			if tc.podUID {
				p.podUID = string(web0.UID)
			}

			// Sufficient: a real run delivers.
			h := newHook(t)
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			code, _, stderr := p.main(ctx, "-on-start="+h.command(), "-bootstrap-timeout=60s")
			if ds := h.deliveries(t); code != peerfinder.ExitOK || len(ds) != 1 || !slices.Equal(ds[0].peers, []string{"web-0", "web-1"}) {
				t.Fatalf("with %s: exit %d, deliveries %v:\n%s", tc.file, code, ds, stderr)
			}
			code, out, stderr := p.main(t.Context(), "-diagnose")
			if code != peerfinder.ExitOK || strings.Contains(out, "MISSING") {
				t.Fatalf("diagnose with %s: exit %d:\n%s\n%s", tc.file, code, out, stderr)
			}

			// Necessary: each verb taken away is named by diagnose.
			for _, perm := range permissions(role) {
				setRules(t, c, ns, role, without(role, perm))
				want := "MISSING  " + perm.text + " "
				// RBAC changes reach the authorizer through a watch.
				await.Poll{Every: 200 * time.Millisecond}.Check(t, func() error {
					if code, out, _ = p.main(t.Context(), "-diagnose"); code != peerfinder.ExitError || !strings.Contains(out, want) {
						return fmt.Errorf("diagnose exit %d:\n%s", code, out)
					}
					return nil
				}, "without %q: diagnose exit 1 and a line %q", perm.text, want)
			}

			// Nothing granted: a real run says what is refused and retries.
			setRules(t, c, ns, role, nil)
			// The authorizer has seen it: diagnose names every verb missing.
			await.Poll{Every: 200 * time.Millisecond}.Check(t, func() error {
				_, out, _ := p.main(t.Context(), "-diagnose")
				for _, perm := range permissions(role) {
					if !strings.Contains(out, "MISSING  "+perm.text+" ") {
						return fmt.Errorf("%s not missing yet:\n%s", perm.text, out)
					}
				}
				return nil
			}, "diagnose to find every permission missing")
			h = newHook(t)
			code, _, stderr = p.main(t.Context(), "-on-start="+h.command(), "-bootstrap-timeout=5s")
			if code != peerfinder.ExitBootstrapTimeout {
				t.Fatalf("with no permission: exit %d, want %d:\n%s", code, peerfinder.ExitBootstrapTimeout, stderr)
			}
			// Either peer-finder's own forbidden line (verb=... resource=...)
			// or the API server's message quoted in an error.
			var named bool
			for _, perm := range permissions(role) {
				full, _, _ := strings.Cut(strings.Fields(perm.text)[1], "/")
				res, _, _ := strings.Cut(full, ".")
				for _, form := range []string{
					fmt.Sprintf("verb=%s resource=%s ", perm.verb, full),
					fmt.Sprintf(`cannot %s resource \"%s\"`, perm.verb, res),
					fmt.Sprintf(`cannot %s resource "%s"`, perm.verb, res),
				} {
					named = named || strings.Contains(stderr, form)
				}
			}
			if !named {
				t.Errorf("with no permission the log names no refused permission of %s:\n%s", tc.file, stderr)
			}
		})
	}
}
