package controller_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/controller"
	"github.com/flockd/flock/internal/version"
)

// TestBuildInfoMetric: a manager registers flock_build_info (1, with the
// build's labels) on controller-runtime's registry, which /metrics serves.
func TestBuildInfoMetric(t *testing.T) {
	e := newEnv(t, 0)
	e.startManager()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := version.Get()
	want := map[string]string{"version": v.Version, "commit": v.Commit, "goversion": v.GoVersion}
	for _, mf := range mfs {
		if mf.GetName() != "flock_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("flock_build_info = %v, want one series of value 1", mf.GetMetric())
		}
		got := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("flock_build_info label %s = %q, want %q", k, got[k], w)
			}
		}
		return
	}
	t.Fatal("flock_build_info not registered")
}

// TestMetricsSecure: with MetricsSecure (the binary's default), /metrics is
// HTTPS and answers 401 without a token, 403 to a ServiceAccount without
// config/rbac/metrics_reader_role.yaml, and the metrics (flock_build_info
// among them) to one bound to it. The controller reviews the tokens with
// its own generated RBAC (tokenreviews, subjectaccessreviews).
func TestMetricsSecure(t *testing.T) {
	e := newEnv(t, 0)
	addr := e.startSecureMetrics()

	reader := e.metricsToken("reader", true)
	stranger := e.metricsToken("stranger", false)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed
	get := func(token string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	e.c.WaitFor(t, "metrics server up, 401 without a token", deadline, func(context.Context) (bool, error) {
		code, body, err := get("")
		return err == nil && code == http.StatusUnauthorized, fmt.Errorf("%d %q %v", code, body, err) //nolint:errorlint // a progress note; err is often nil
	})
	if code, body, err := get(stranger); err != nil || code != http.StatusForbidden {
		t.Errorf("without the reader role: %d %q %v; want 403", code, body, err)
	}
	code, body, err := get(reader)
	if err != nil || code != http.StatusOK || !strings.Contains(body, "flock_build_info{") {
		t.Errorf("with the reader role: %d %v, flock_build_info in body: %v; want 200 and the metrics", code, err, strings.Contains(body, "flock_build_info{"))
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered 200")
		}
	}
}

// metricsToken returns the token of a new ServiceAccount of the test's
// namespace, bound to a copy of config/rbac/metrics_reader_role.yaml when
// reader is true.
func (e *env) metricsToken(name string, reader bool) string {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	if err := e.cl.Create(ctx, sa); err != nil {
		e.t.Fatal(err)
	}
	if reader {
		raw, err := os.ReadFile("../config/rbac/metrics_reader_role.yaml")
		if err != nil {
			e.t.Fatal(err)
		}
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(raw, &role); err != nil {
			e.t.Fatal(err)
		}
		role.ObjectMeta = metav1.ObjectMeta{Name: "flock-metrics-reader-" + e.pool}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: e.ns}},
		}
		for _, o := range []client.Object{&role, binding} {
			if err := e.cl.Create(ctx, o); err != nil {
				e.t.Fatal(err)
			}
			e.t.Cleanup(func() { _ = e.cl.Delete(context.Background(), o) })
		}
	}
	tok, err := e.c.Client.CoreV1().ServiceAccounts(e.ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.Status.Token
}

// TestMemberMetrics: one flock_member_ready series per active member, a
// flock_member_waiting_since_seconds series for each waiting one, and a
// new status or Forget removes what no longer holds.
func TestMemberMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := controller.NewMemberMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	since := metav1.Unix(1700000000, 0)
	m.Record("ns", "db", flockv1.FlockStatus{Members: []flockv1.MemberStatus{
		{Ordinal: 0, Node: "n0", Active: true, Ready: true},
		{Ordinal: 1, Node: "n1", Active: true, Waiting: controller.WaitNodeNotReady, WaitingSince: &since},
		{Ordinal: 2, Node: "n2", Active: false},
	}})
	m.Record("other", "db", flockv1.FlockStatus{Members: []flockv1.MemberStatus{{Ordinal: 0, Active: true}}})
	want := `
# HELP flock_member_ready 1 while the Flock member's pod is Ready, else 0 (active members; node empty until placed).
# TYPE flock_member_ready gauge
flock_member_ready{flock="db",member="0",namespace="ns",node="n0"} 1
flock_member_ready{flock="db",member="1",namespace="ns",node="n1"} 0
flock_member_ready{flock="db",member="0",namespace="other",node=""} 0
# HELP flock_member_waiting_since_seconds When the Flock member started waiting (status.members[].waitingSince, Unix seconds), by reason (status.members[].waiting); absent while it does not wait.
# TYPE flock_member_waiting_since_seconds gauge
flock_member_waiting_since_seconds{flock="db",member="1",namespace="ns",node="n1",reason="NodeNotReady"} 1.7e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	m.Record("ns", "db", flockv1.FlockStatus{Members: []flockv1.MemberStatus{
		{Ordinal: 0, Node: "n0", Active: true, Ready: true},
		{Ordinal: 1, Node: "n3", Active: true, Ready: true},
	}})
	m.Forget("other", "db")
	want = `
# HELP flock_member_ready 1 while the Flock member's pod is Ready, else 0 (active members; node empty until placed).
# TYPE flock_member_ready gauge
flock_member_ready{flock="db",member="0",namespace="ns",node="n0"} 1
flock_member_ready{flock="db",member="1",namespace="ns",node="n3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// startSecureMetrics starts the manager serving HTTPS /metrics on a free
// loopback port (the binary's default, MetricsSecure) and returns the
// address.
func (e *env) startSecureMetrics() string {
	e.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	e.startManagerWith(func(o *controller.ManagerOptions) { o.MetricsAddr, o.MetricsSecure = addr, true })
	return addr
}
