package hostsfile

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/localcluster/clustertest"
)

// TestRBACForbiddenThenGranted runs peer-finder -source=endpointslice as a
// ServiceAccount without its Role (fault matrix: RBAC forbidden, then
// granted): one clear log line says what is forbidden and how to grant it,
// the forbidden failures are counted, flock_kube_list_watch_failing is 1,
// /readyz is not ready and nothing is delivered. Once the example Role and
// RoleBinding are applied the same process delivers both members, with no
// restart, and the failing state clears.
func TestRBACForbiddenThenGranted(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	load(t, "examples/rbac/serviceaccount.yaml").apply(t, c, ns)
	fixture.HeadlessService(t, c.Client, ns, false)
	fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{ServiceAccountName: "peer-finder"})
	podsBy(t, c.Client, ns, "app=web", 2)

	doc := filepath.Join(t.TempDir(), "peers.json")
	p := start(t, "web-0", []string{
		"-kubeconfig=" + kubeconfigFor(t, c, ns, "peer-finder"), "-domain=cluster.local", "-hostname=web-0", "-service=web",
		"-source=endpointslice", "-json-file=" + doc, "-metrics-addr=127.0.0.1:0",
	}, []string{"POD_NAME=web-0", "POD_NAMESPACE=" + ns})

	var base string
	eventually(t, "the metrics address is logged", func() (bool, string) {
		m := regexp.MustCompile(`msg="serving metrics and health" addr=(\S+)`).FindStringSubmatch(p.Stderr.String())
		if m == nil {
			return false, p.Stderr.String()
		}
		base = "http://" + m[1]
		return true, ""
	})
	const forbidden = `flock_kube_list_watch_failures_total{reason="forbidden",resource="endpointslices.discovery.k8s.io",verb=`
	eventually(t, "forbidden failures counted twice (a retry)", func() (bool, string) {
		body := get(t, base+"/metrics")
		return sumMetric(body, forbidden) >= 2, body
	})
	lines := grep(p.Stderr.String(), "forbids")
	if len(lines) != 1 {
		t.Fatalf("want one forbidden log line, got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{"level=ERROR", "resource=endpointslices.discovery.k8s.io", "namespace=" + ns, "serviceaccount=" + ns + "/peer-finder", "kubectl"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the forbidden line lacks %q: %s", want, lines[0])
		}
	}
	if m := get(t, base+"/metrics"); !strings.Contains(m, `flock_kube_list_watch_failing{resource="endpointslices.discovery.k8s.io"} 1`) {
		t.Errorf("flock_kube_list_watch_failing is not 1 while forbidden:\n%s", strings.Join(grep(m, "flock_kube_list_watch_failing"), "\n"))
	}
	if code, body := getStatus(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d %q while forbidden, want 503", code, body)
	}
	if _, err := os.Stat(doc); err == nil {
		t.Errorf("the JSON file was written while forbidden")
	}

	load(t, "examples/rbac/endpointslice.yaml").apply(t, c, ns)
	eventually(t, "both members delivered after the Role was granted", func() (bool, string) {
		b, _ := os.ReadFile(doc)
		s := string(b)
		return strings.Contains(s, "web-0."+"web."+ns) && strings.Contains(s, "web-1."+"web."+ns), s
	})
	if p.Exited() {
		t.Fatalf("peer-finder exited (status %d); it must recover without a restart", p.Status())
	}
	if code, body := getStatus(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d %q after the grant, want 200", code, body)
	}
	if m := get(t, base+"/metrics"); !strings.Contains(m, `flock_kube_list_watch_failing{resource="endpointslices.discovery.k8s.io"} 0`) {
		t.Errorf("flock_kube_list_watch_failing is not 0 after the grant:\n%s", strings.Join(grep(m, "flock_kube_list_watch_failing"), "\n"))
	}
	if n := len(grep(p.Stderr.String(), "forbids")); n != 1 {
		t.Errorf("%d forbidden log lines in all, want 1", n)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	_, body := getStatus(t, url)
	return body
}

func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// sumMetric adds the values of the samples of body whose line starts with
// prefix.
func sumMetric(body, prefix string) float64 {
	var sum float64
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
