package clustertest

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// ServiceAccountConfig creates a ServiceAccount in ns allowed exactly rules
// (through a Role and RoleBinding in ns) and returns a rest.Config that
// authenticates as it with a one-hour token. With no rules it may do nothing,
// which is how tests exercise "forbidden" paths. The objects go away with ns.
func (c *Cluster) ServiceAccountConfig(t testing.TB, ns string, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := context.Background()
	name := "sa-" + randSuffix()
	sa, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, name, err)
	}
	if len(rules) > 0 {
		if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Role %s/%s: %v", ns, name, err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}
		if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create RoleBinding %s/%s: %v", ns, name, err)
		}
	}
	expiry := int64(3600)
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return &rest.Config{
		Host:            c.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.Config.CAData, CAFile: c.Config.CAFile},
		BearerToken:     tok.Status.Token,
		QPS:             c.Config.QPS,
		Burst:           c.Config.Burst,
	}
}
