package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	pfstatus "github.com/flockd/flock/peerfinder/status"
)

// statusImage is the peer-finder image of TestStatusCommand's members:
// $FLOCK_STATUS_IMAGE when set (an image built under another tag and
// loaded into the real nodes while the cluster still runs an older :dev),
// else Image.
func statusImage() string {
	if img := os.Getenv("FLOCK_STATUS_IMAGE"); img != "" {
		return img
	}
	return Image
}

// TestStatusCommand runs `peer-finder status` (its Go entry point, as the
// binary's main calls it) against a StatefulSet of three members whose
// peer-finder sidecar waits for spec.replicas members (-expect=auto) and
// records the formation in a cluster Lease, as a ServiceAccount allowed
// exactly examples/status/rbac.yaml: every member is a row with the three
// peers, generation and role (db-0 forms, db-1 and db-2 join, db-0 the
// former); a pod of the selector that cannot be scheduled is a row with its
// reason and the exit status says not every member answered; scaled to
// four while a ResourceQuota keeps db-3 from being created, each member
// says the size gate holds its next delivery (3 of 4 peers visible) and
// still shows the three it delivered; and without either permission of
// the file the command does not get its answers.
func TestStatusCommand(t *testing.T) {
	b := newBed(t)
	b.service("db")
	b.rbac("endpointslice.yaml", "expect-auto.yaml", "cluster-lease.yaml", "events.yaml")
	b.dumpOnFailure("app=db")
	sidecar := corev1.Container{
		Name: "peer-finder", Image: statusImage(),
		Args: []string{"-service=db", "-source=endpointslice", "-include-not-ready", "-expect=auto",
			"-cluster-lease=db-cluster", "-on-change=/scripts/on-change.sh", "-metrics-addr=:9090"},
		Ports: []corev1.ContainerPort{{Name: "flock-metrics", ContainerPort: 9090}},
	}
	b.statefulSet("db", 3, corev1.PodSpec{
		ServiceAccountName: "peer-finder",
		Containers:         []corev1.Container{{Name: "app", Image: statusImage(), Command: []string{"sleep", "infinity"}}, sidecar},
	})
	for _, pod := range []string{"db-0", "db-1", "db-2"} {
		b.waitLog(pod, "peer-finder", "peers delivered", 3*time.Minute)
	}

	kubeconfig := b.kubeconfigFor(b.ServiceAccountConfig(t, b.ns, statusRules(t)...))
	args := []string{"-kubeconfig=" + kubeconfig, "-n", b.ns, "-l", "app=db"}
	code, out, errOut := runStatus(t, append(args, "-o", "json")...)
	var r pfstatus.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != pfstatus.ExitAnswered {
		t.Fatalf("status -o json: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, out, errOut)
	}
	all := []string{b.fqdn("db-0", "db"), b.fqdn("db-1", "db"), b.fqdn("db-2", "db")}
	roles := map[string]string{"db-0": "form", "db-1": "join", "db-2": "join"}
	if len(r.Members) != 3 {
		t.Fatalf("%d members, want db-0..2:\n%s", len(r.Members), out)
	}
	for i, m := range r.Members {
		d := m.Status
		if m.Pod != []string{"db-0", "db-1", "db-2"}[i] || d == nil || d.Delivered == nil {
			t.Errorf("member %d: %+v, want db-%d with a delivered set", i, m, i)
			continue
		}
		if l := d.Delivered; !slices.Equal(l.Peers, all) || l.Generation < 1 || l.Bootstrap != roles[m.Pod] || l.Former != all[0] || d.HeldBy != nil {
			t.Errorf("%s delivered %+v (held by %+v), want the three peers, role %s, former db-0", m.Pod, l, d.HeldBy, roles[m.Pod])
		}
	}
	_, table, _ := runStatus(t, args...)
	t.Logf("peer-finder status:\n%s", table)
	for pod, role := range roles {
		if !strings.Contains(table, pod+" ") || !strings.Contains(lineOf(table, pod+" "), " "+role+" ") || !strings.Contains(lineOf(table, pod+" "), "db-0,db-1,db-2") {
			t.Errorf("the table's row of %s lacks role %s or the peers:\n%s", pod, role, table)
		}
	}

	// A member that cannot run is a row with its reason, not a failure of
	// the whole command; the exit status says not all answered.
	stray := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-stray", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"flock.test/no-such-node": "true"},
			Containers:   []corev1.Container{{Name: "app", Image: statusImage(), Command: []string{"sleep", "infinity"}}},
		},
	}
	if _, err := b.Client.CoreV1().Pods(b.ns).Create(context.Background(), stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, table, _ = runStatus(t, args...)
	if row := lineOf(table, "db-stray "); code != pfstatus.ExitNotAnswered || !strings.Contains(row, "pod is pending, not Running") || !strings.Contains(table, "db-2 ") {
		t.Errorf("with an unschedulable member: exit %d, want %d and its row saying why:\n%s", code, pfstatus.ExitNotAnswered, table)
	}

	// The size gate holds the next delivery: a fourth member is expected
	// and cannot be created.
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "four-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("4")}},
	}
	if _, err := b.Client.CoreV1().ResourceQuotas(b.ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the quota to count 4 pods", time.Minute, func(ctx context.Context) (bool, error) {
		q, err := b.Client.CoreV1().ResourceQuotas(b.ns).Get(ctx, quota.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used := q.Status.Used[corev1.ResourcePods]
		return used.Value() == 4, nil
	})
	b.scale("db", 4)
	b.WaitFor(t, "every member held by the size gate", time.Minute, func(context.Context) (bool, error) {
		_, out, _ = runStatus(t, append(args, "-o", "json")...)
		r = pfstatus.Report{}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return false, err
		}
		held := 0
		for _, m := range r.Members {
			if d := m.Status; d != nil && d.HeldBy != nil && d.HeldBy.Gate == "too-few-peers" && strings.Contains(d.HeldBy.Detail, "3 of 4") &&
				d.Delivered != nil && slices.Equal(d.Delivered.Peers, all) && d.Delivered.Bootstrap == roles[m.Pod] {
				held++
			}
		}
		return held == 3, nil
	})
	_, table, _ = runStatus(t, args...)
	t.Logf("peer-finder status, scaled to 4:\n%s", table)
	if row := lineOf(table, "db-1 "); !strings.Contains(row, "too-few-peers: 3 of 4 peers visible") || !strings.Contains(row, "db-0,db-1,db-2") {
		t.Errorf("db-1's row does not say what holds it:\n%s", table)
	}

	// Each permission of the file is needed.
	rules := statusRules(t)
	for i := range rules {
		fewer := slices.Delete(slices.Clone(rules), i, i+1)
		kc := b.kubeconfigFor(b.ServiceAccountConfig(t, b.ns, fewer...))
		code, out, errOut := runStatus(t, "-kubeconfig="+kc, "-n", b.ns, "-l", "app=db", "-o", "json")
		if code != pfstatus.ExitNotAnswered || strings.Contains(out, `"delivered"`) || !strings.Contains(out+errOut, "forbidden") {
			t.Errorf("without %v: exit %d, want %d, no member's status and a forbidden error:\n%s\n%s", rules[i].Resources, code, pfstatus.ExitNotAnswered, out, errOut)
		}
	}
}

// statusRules are the rules of examples/status/rbac.yaml's ClusterRole,
// given to the test's ServiceAccount in a Role of its namespace (a
// ClusterRole would outlive the namespace and clash between tests).
func statusRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(repoFile(t, "examples/status/rbac.yaml"), &role); err != nil || role.Kind != "ClusterRole" || len(role.Rules) == 0 {
		t.Fatalf("examples/status/rbac.yaml: %v (%+v)", err, role)
	}
	return role.Rules
}

// kubeconfigFor writes a kubeconfig of cfg (a host, its CA and a token).
func (b *bed) kubeconfigFor(cfg *rest.Config) string {
	b.t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["user"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "user"
	path := filepath.Join(b.t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// runStatus runs `peer-finder status args...` and returns its exit status,
// stdout and stderr.
func runStatus(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := pfstatus.Main(ctx, args, func(string) string { return "" }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// lineOf is the first line of s that starts with prefix.
func lineOf(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
