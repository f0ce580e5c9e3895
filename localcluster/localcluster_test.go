package localcluster

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
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

func TestNextRealNodeIndex(t *testing.T) {
	nodes := func(idx ...int) []*RealNode {
		var ns []*RealNode
		for _, i := range idx {
			ns = append(ns, newRealNode("/state", i))
		}
		return ns
	}
	tests := []struct {
		nodes []*RealNode
		want  int
	}{
		{nil, 0},
		{nodes(0, 1, 2), 3},
		{nodes(0, 2), 1}, // the lowest free index
		{nodes(2, 0, 1, 3), 4},
	}
	for _, tt := range tests {
		if got, err := nextRealNodeIndex(tt.nodes); err != nil || got != tt.want {
			t.Errorf("nextRealNodeIndex(%d nodes) = %d, %v; want %d", len(tt.nodes), got, err, tt.want)
		}
	}
	full := make([]int, maxRealNodes)
	for i := range full {
		full[i] = i
	}
	if i, err := nextRealNodeIndex(nodes(full...)); err == nil {
		t.Errorf("nextRealNodeIndex(%d nodes) = %d; want an error", maxRealNodes, i)
	}
}

// TestNodePKI issues a node's kubelet credentials from the CA writePKI kept,
// as AddRealNode does for a running cluster.
func TestNodePKI(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o700); err != nil {
		t.Fatal(err)
	}
	const server = "https://10.245.0.1:6443"
	if err := writePKI(dir, server, nil); err != nil {
		t.Fatal(err)
	}
	n := newRealNode(dir, 3)
	if err := writeNodePKI(dir, server, n); err != nil {
		t.Fatal(err)
	}
	ca, err := loadAuthority(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	b, err := os.ReadFile(filepath.Join(dir, "pki", "kubelet-real-3.crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("kubelet-real-3.crt: no PEM")
	}
	serving, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"real-3", "10.245.3.1"} {
		if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(n.kubeconfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	blk, _ = pem.Decode(auth.ClientCertificateData)
	if blk == nil {
		t.Fatal("kubeconfig: no client certificate")
	}
	client, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if got := client.Subject.CommonName + " " + strings.Join(client.Subject.Organization, ","); got != "system:node:real-3 system:nodes" {
		t.Errorf("client identity %q, want system:node:real-3 in system:nodes", got)
	}
	if c := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]; c.Server != server {
		t.Errorf("kubeconfig server %s, want %s", c.Server, server)
	}
}
