// Package helm tests the Helm chart charts/flock-controller with Helm itself
// (helm.sh/helm/v4, built by "make helm"): helm lint, a golden helm
// template, the rendered objects against what kustomize renders from
// config/, and on the local cluster helm install, test, upgrade and
// uninstall.
package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/internal/testing/golden"
	"github.com/flockd/flock/internal/testing/need"
)

const chart = "../../charts/flock-controller"

// helmBinary is the helm "make helm" built: $FLOCK_HELM (make test sets
// it), else ~/.cache/flock/tools/helm-<HELM_VERSION of the Makefile>. A
// test without it ends through need.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLOCK_HELM"); p != "" {
		return p
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HELM_VERSION \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no HELM_VERSION")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, ".cache", "flock", "tools", "helm-"+string(m[1]))
	if _, err := os.Stat(p); err != nil {
		need.Unavailable(t, "helm", fmt.Sprintf("no helm at %s (run make helm, or set FLOCK_HELM): %v", p, err))
	}
	return p
}

// helm runs the helm binary with args, its configuration and cache in a
// directory of the test's own, and returns its standard output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String(), nil
}

// mustHelm is helm that fails the test on an error.
func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChartCRDIsGenerated: the chart's crds/ holds the CRD make manifests
// generates into config/crd/bases, byte for byte (make manifests copies it;
// make verify fails when it is stale), and Chart.yaml's versions are
// VERSION's.
func TestChartCRDIsGenerated(t *testing.T) {
	want, err := os.ReadFile("../../config/crd/bases/flockd.io_flocks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chart + "/crds/flockd.io_flocks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("charts/flock-controller/crds/flockd.io_flocks.yaml differs from config/crd/bases/flockd.io_flocks.yaml: run make manifests")
	}
	version, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(version))
	var meta struct{ Version, AppVersion string }
	raw, err := os.ReadFile(chart + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != strings.TrimPrefix(v, "v") || meta.AppVersion != v {
		t.Errorf("Chart.yaml: version %q, appVersion %q; want %q and %q (VERSION)", meta.Version, meta.AppVersion, strings.TrimPrefix(v, "v"), v)
	}
}

// TestLint: helm lint --strict passes for both scopes, and the chart
// refuses what it should: through the values schema a flag that is not one,
// an unknown scope, an unknown value, an empty repository; and helm
// template two replicas without leader election.
func TestLint(t *testing.T) {
	for _, scope := range []string{"cluster", "namespace"} {
		mustHelm(t, "lint", "--strict", chart, "--set", "scope="+scope, "--set", "podDisruptionBudget.enabled=true")
	}
	for _, bad := range []string{"scope=everywhere", "extraArgs={log-level=debug}", "replica=3", "image.repository="} {
		if out, err := helm(t, "lint", "--strict", chart, "--set", bad); err == nil {
			t.Errorf("helm lint --set %s passed; want the values schema to refuse it\n%s", bad, out)
		}
	}
	// helm lint only logs a template's fail; helm template (and install) stop.
	if out, err := helm(t, "template", chart, "--set", "leaderElection=false"); err == nil || !strings.Contains(err.Error(), "need leaderElection: true") {
		t.Errorf("helm template --set leaderElection=false with 2 replicas: %v; want the chart to refuse it\n%s", err, out)
	}
	mustHelm(t, "template", chart, "--set", "leaderElection=false", "--set", "replicas=1")
}

// TestTemplate: helm template's output for the default values and for the
// namespaced scope with a PodDisruptionBudget and nodes chosen
// (testdata/*.golden; go test -update rewrites them).
func TestTemplate(t *testing.T) {
	golden.Check(t, "default", []byte(mustHelm(t, "template", "flock-controller", chart, "--namespace", "flock-system")))
	golden.Check(t, "namespaced", []byte(mustHelm(t, "template", "team-a", chart, "--namespace", "team-a",
		"--set", "scope=namespace", "--set", "podDisruptionBudget.enabled=true", "--set", "replicas=3",
		"--set", "nodeSelector.disktype=ssd", "--set", "extraArgs={-log-level=debug}")))
}

// TestSameAsKustomize: for the same settings (release flock-controller in
// flock-system) the chart renders the objects kustomize renders from
// config/default, or config/namespaced with scope=namespace, apart from
// what Helm adds or leaves to helm install: its labels (chart, instance,
// version, managed-by, and the name label on every object), the Namespace
// (helm install --create-namespace), the test hook, and the metrics reader
// ClusterRole named after the release (config/'s flock-metrics-reader).
func TestSameAsKustomize(t *testing.T) {
	for _, tc := range []struct {
		scope, dir string
		crds       bool // config/default has the CRD; config/namespaced leaves it to config/crd
	}{{"cluster", "default", true}, {"namespace", "namespaced", false}} {
		t.Run(tc.dir, func(t *testing.T) {
			m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "../../config/"+tc.dir)
			if err != nil {
				t.Fatalf("kustomize config/%s: %v", tc.dir, err)
			}
			rendered, err := m.AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			want := objects(t, rendered)
			delete(want, "Namespace//flock-system")
			if o, ok := want["ClusterRole//flock-metrics-reader"]; ok {
				delete(want, "ClusterRole//flock-metrics-reader")
				o.SetName("flock-controller-metrics-reader")
				want[key(o)] = o
			}
			args := []string{"template", "flock-controller", chart, "--namespace", "flock-system", "--skip-tests", "--set", "scope=" + tc.scope}
			if tc.crds {
				args = append(args, "--include-crds")
			}
			got := objects(t, []byte(mustHelm(t, args...)))
			for k, o := range got {
				w, ok := want[k]
				if !ok {
					t.Errorf("the chart renders %s; config/%s has no such object", k, tc.dir)
					continue
				}
				withoutHelmLabels(o, w)
				withoutHelmLabels(w, nil)
				if d := cmp.Diff(w.Object, o.Object); d != "" {
					t.Errorf("%s differs (-config/%s +chart):\n%s", k, tc.dir, d)
				}
			}
			for k := range want {
				if _, ok := got[k]; !ok {
					t.Errorf("config/%s has %s; the chart does not render it", tc.dir, k)
				}
			}
		})
	}
}

// key names an object as Kind/namespace/name.
func key(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// objects parses a multi-document manifest, by key.
func objects(t *testing.T, manifest []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var o map[string]any
		if err := d.Decode(&o); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("parse manifest: %v", err)
		}
		if o == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: o}
		if _, dup := out[key(u)]; dup {
			t.Fatalf("%s twice", key(u))
		}
		out[key(u)] = u
	}
}

// helmLabels are the labels the chart adds to objects and selectors to
// tell releases apart; kustomize's config/ has none of them.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// withoutHelmLabels removes helmLabels from o's labels and selectors, and
// the name label from o's own labels unless like (kustomize's object) has
// it too.
func withoutHelmLabels(o, like *unstructured.Unstructured) {
	for _, path := range [][]string{
		{"metadata", "labels"}, {"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}, {"spec", "selector"},
	} {
		// A Deployment's spec.selector is no string map: not ok.
		labels, ok, _ := unstructured.NestedStringMap(o.Object, path...)
		if !ok {
			continue
		}
		for _, l := range helmLabels {
			delete(labels, l)
		}
		if path[0] == "metadata" && like != nil {
			if _, ok := like.GetLabels()["app.kubernetes.io/name"]; !ok {
				delete(labels, "app.kubernetes.io/name")
			}
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, path...)
			continue
		}
		_ = unstructured.SetNestedStringMap(o.Object, labels, path...)
	}
}
