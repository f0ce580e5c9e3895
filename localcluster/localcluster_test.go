package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestNodeCIDR(t *testing.T) {
	tests := []struct {
		i, n int
		want string
	}{
		{0, 1, "10.244.0.0/16"},
		{0, 4, "10.244.0.0/18"},
		{3, 4, "10.244.192.0/18"},
		{4, 5, "10.244.128.0/19"},
		{255, 300, "10.244.255.0/24"},
	}
	for _, tt := range tests {
		if got := nodeCIDR(tt.i, tt.n); got != tt.want {
			t.Errorf("nodeCIDR(%d, %d) = %s, want %s", tt.i, tt.n, got, tt.want)
		}
	}
}

func TestDefaultBinaryName(t *testing.T) {
	tests := map[string]string{
		"go.etcd.io/etcd/server/v3":            "server",
		"k8s.io/kubernetes/cmd/kube-apiserver": "kube-apiserver",
		"github.com/coredns/coredns":           "coredns",
		"example.com/v":                        "v",
	}
	for pkg, want := range tests {
		if got := defaultBinaryName(pkg); got != want {
			t.Errorf("defaultBinaryName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// TestComponentsMatchHelperModules keeps the version keys of the cache in step
// with what the helper modules pin and build.
func TestComponentsMatchHelperModules(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Components {
		b, err := os.ReadFile(filepath.Join(root, "hack", "components", c.Name, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		mod := string(b)
		if !strings.Contains(mod, "\t"+c.Module+" "+c.Version+" ") && !strings.Contains(mod, "\t"+c.Module+" "+c.Version+"\n") {
			t.Errorf("hack/components/%s/go.mod does not require %s %s", c.Name, c.Module, c.Version)
		}
		for _, pkg := range c.Binaries {
			if !strings.Contains(mod, "tool "+pkg+"\n") && !strings.Contains(mod, "\t"+pkg+"\n") && !strings.Contains(mod, "module "+pkg+"\n") {
				t.Errorf("hack/components/%s/go.mod has no tool directive for %s and is not its module", c.Name, pkg)
			}
		}
	}
}

func TestKubeVersionLDFlags(t *testing.T) {
	got := kubeVersionLDFlags("v1.37.2")
	for _, want := range []string{"k8s.io/component-base/version.gitVersion=v1.37.2", "version.gitMajor=1 ", "version.gitMinor=37 "} {
		if !strings.Contains(got, want) {
			t.Errorf("kubeVersionLDFlags: %q lacks %q", got, want)
		}
	}
}

// TestKwokConfig renders the kwok configuration and checks every document
// parses and every stage is there.
func TestKwokConfig(t *testing.T) {
	var b strings.Builder
	if err := kwokConfig.Execute(&b, map[string]any{"PodCIDR": PodCIDR, "ReadyDelayMillis": 500}); err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, doc := range strings.Split(b.String(), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("document does not parse: %v\n%s", err, doc)
		}
		if obj.Kind == "Stage" {
			stages = append(stages, obj.Metadata.Name)
		}
	}
	want := []string{"flock-node-initialize", "flock-node-heartbeat", "flock-pod-start", "flock-pod-ready", "flock-pod-not-ready",
		"flock-pod-fail", "flock-pod-complete", "flock-pod-terminate", "flock-pod-release-ip", "flock-pod-remove"}
	if strings.Join(stages, " ") != strings.Join(want, " ") {
		t.Errorf("stages %v, want %v", stages, want)
	}
	if !strings.Contains(b.String(), "durationMilliseconds: 500\n") {
		t.Error("readiness delay not rendered")
	}
}

func TestClaimIsExclusive(t *testing.T) {
	s := &State{StateDir: t.TempDir()}
	release, ok, err := s.Claim("campaign")
	if err != nil || !ok {
		t.Fatalf("first Claim = %v, %v", ok, err)
	}
	if _, ok, err := s.Claim("campaign"); err != nil || ok {
		t.Fatalf("second Claim while held = %v, %v; want not ok", ok, err)
	}
	if r, ok, err := s.Claim("other"); err != nil || !ok {
		t.Fatalf("Claim of another name = %v, %v", ok, err)
	} else {
		r()
	}
	release()
	if r, ok, err := s.Claim("campaign"); err != nil || !ok {
		t.Fatalf("Claim after release = %v, %v", ok, err)
	} else {
		r()
	}
}
