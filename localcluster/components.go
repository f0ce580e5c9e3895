package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A Component is a set of binaries built from one helper module under
// hack/components/<Name>, pinned by that module's go.mod and go.sum (and
// its own .go files, if it has any).
type Component struct {
	Name    string // helper module directory and cache key prefix
	Module  string // the pinned upstream module
	Version string // its version; must match the helper go.mod (tested)
	// Binaries maps the installed binary name to its package path.
	Binaries map[string]string
	// LDFlags are passed to go build (version stamping).
	LDFlags string
	// ColdBuild is the typical first build time on 2 cores, printed as a hint.
	ColdBuild time.Duration
}

// Components lists everything the local cluster runs, in build order.
var Components = []Component{
	{
		Name: "etcd", Module: "go.etcd.io/etcd/server/v3", Version: "v3.7.3",
		Binaries:  map[string]string{"etcd": "go.etcd.io/etcd/server/v3"},
		ColdBuild: time.Minute,
	},
	{
		Name: "kubernetes", Module: "k8s.io/kubernetes", Version: "v1.37.2",
		Binaries: map[string]string{
			"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
			"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
			"kube-scheduler":          "k8s.io/kubernetes/cmd/kube-scheduler",
			"peer-finder":             "k8s.io/kubernetes/test/images/pets/peer-finder",
		},
		LDFlags:   kubeVersionLDFlags("v1.37.2"),
		ColdBuild: 8 * time.Minute,
	},
	{
		// The real node's kubelet and kube-proxy, at the control plane's
		// version; a module of their own keeps the control plane's cache
		// key stable (they need extra dependencies).
		Name: "kubernetes-node", Module: "k8s.io/kubernetes", Version: "v1.37.2",
		Binaries: map[string]string{
			"kubelet":    "k8s.io/kubernetes/cmd/kubelet",
			"kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy",
		},
		LDFlags:   kubeVersionLDFlags("v1.37.2"),
		ColdBuild: 3 * time.Minute,
	},
	{
		Name: "kwok", Module: "sigs.k8s.io/kwok", Version: "v0.8.0",
		Binaries:  map[string]string{"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
		ColdBuild: 90 * time.Second,
	},
	{
		// The real node's volumes (the default StorageClass): the helper
		// module's own main.go on the pinned library.
		Name: "hostdir-provisioner", Module: "sigs.k8s.io/sig-storage-lib-external-provisioner/v13", Version: "v13.1.0",
		Binaries:  map[string]string{"hostdir-provisioner": "github.com/flockd/flock/hack/components/hostdir-provisioner"},
		ColdBuild: 3 * time.Minute,
	},
	{
		Name: "coredns", Module: "github.com/coredns/coredns", Version: "v1.15.0",
		Binaries:  map[string]string{"coredns": "github.com/coredns/coredns"},
		ColdBuild: 2 * time.Minute,
	},
	{
		// etcd's client, for the etcd application image (make images): not
		// run by the cluster itself. A module of its own keeps etcd's cache
		// key stable.
		Name: "etcdctl", Module: "go.etcd.io/etcd/etcdctl/v3", Version: "v3.7.3",
		Binaries:  map[string]string{"etcdctl": "go.etcd.io/etcd/etcdctl/v3"},
		ColdBuild: time.Minute,
	},
}

// kubeVersionLDFlags stamps the version the way the Kubernetes release build does,
// so "kube-apiserver --version" and the /version endpoint report it.
func kubeVersionLDFlags(v string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var b strings.Builder
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean",
			pkg, v, pkg, major, pkg, minor, pkg)
	}
	return strings.TrimSpace(b.String())
}

// CacheRoot is where built components are kept: $FLOCK_CACHE, else
// <user cache dir>/flock (usually $HOME/.cache/flock).
func CacheRoot() (string, error) {
	if d := os.Getenv("FLOCK_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locate cache dir (set FLOCK_CACHE): %w", err)
	}
	return filepath.Join(d, "flock"), nil
}

// Dir is the component's cache directory, keyed by version.
func (c Component) Dir(cacheRoot string) string {
	return filepath.Join(cacheRoot, c.Name+"-"+c.Version)
}

// Bin returns the path of one of the component's binaries.
func (c Component) Bin(cacheRoot, name string) string {
	return filepath.Join(c.Dir(cacheRoot), "bin", name)
}

// stampFile records the hash of the helper module a build came from.
const stampFile = "build.stamp"

// Binaries resolves the path of every built binary by name. It fails with a
// hint to run the build when one is missing.
func Binaries(cacheRoot string) (map[string]string, error) {
	out := map[string]string{}
	for _, c := range Components {
		for name := range c.Binaries {
			p := c.Bin(cacheRoot, name)
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("%s %s not built (run \"make cluster-build\"): %w", c.Name, c.Version, err)
			}
			out[name] = p
		}
	}
	return out, nil
}

// UpstreamPeerFinder is the path of Kubernetes' own peer-finder binary, built
// for side-by-side comparisons.
func UpstreamPeerFinder(cacheRoot string) string {
	return Components[1].Bin(cacheRoot, "peer-finder")
}

// BuildOptions configure Build.
type BuildOptions struct {
	RepoRoot  string // holds hack/components
	CacheRoot string
	Go        string    // go command; "go" if empty
	Progress  io.Writer // human progress lines; nil discards
	Log       *slog.Logger
}

// Build builds every component whose cached binaries are missing or were built
// from a different helper go.mod/go.sum. Concurrent builds of the same cache wait
// for each other.
func Build(ctx context.Context, o BuildOptions) error {
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.CacheRoot, 0o755); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	if err := InstallNodePackages(ctx, o.Progress); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(o.CacheRoot, ".build.lock"), syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	var cold time.Duration
	for _, c := range Components {
		if !c.upToDate(o) {
			cold += c.ColdBuild
		}
	}
	if cold > 0 {
		fmt.Fprintf(o.Progress, "building the local cluster's components: about %s on 2 idle cores when nothing is cached (more on a busy machine); cached in %s afterwards\n",
			cold, o.CacheRoot)
	}
	for _, c := range Components {
		if err := c.build(ctx, o); err != nil {
			return err
		}
	}
	// The alerting rules' tests (promtool) and the tests' Prometheus server.
	return buildPrometheus(ctx, o)
}

// upToDate reports whether c's cached binaries match its helper module.
func (c Component) upToDate(o BuildOptions) bool {
	stamp, err := c.stamp(filepath.Join(o.RepoRoot, "hack", "components", c.Name))
	if err != nil {
		return false
	}
	old, err := os.ReadFile(filepath.Join(c.Dir(o.CacheRoot), stampFile))
	return err == nil && string(old) == stamp && c.complete(o.CacheRoot)
}

func (c Component) build(ctx context.Context, o BuildOptions) error {
	modDir := filepath.Join(o.RepoRoot, "hack", "components", c.Name)
	stamp, err := c.stamp(modDir)
	if err != nil {
		return err
	}
	dir := c.Dir(o.CacheRoot)
	if c.upToDate(o) {
		o.Log.Debug("component up to date", "component", c.Name, "version", c.Version, "dir", dir)
		return nil
	}
	names := make([]string, 0, len(c.Binaries))
	for n := range c.Binaries {
		names = append(names, n)
	}
	fmt.Fprintf(o.Progress, "building %s %s (%s) into %s; a cold build takes about %s on 2 cores, later runs reuse it\n",
		c.Name, c.Version, strings.Join(sortStrings(names), ", "), dir, c.ColdBuild)
	start := time.Now()
	tmp := filepath.Join(dir, "tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("clean %s: %w", tmp, err)
	}
	// One go build for all binaries of a component compiles shared packages once
	// and in parallel; -o with a directory names each binary after its package.
	args := []string{"build", "-trimpath", "-ldflags", strings.TrimSpace("-s -w " + c.LDFlags), "-o", tmp + string(filepath.Separator)}
	for _, n := range sortStrings(names) {
		args = append(args, c.Binaries[n])
	}
	cmd := exec.CommandContext(ctx, o.Go, args...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	cmd.Stdout, cmd.Stderr = o.Progress, o.Progress
	stop := ticker(o.Progress, c.Name, start)
	err = cmd.Run()
	stop()
	if err != nil {
		return fmt.Errorf("build %s %s: %w", c.Name, c.Version, err)
	}
	for name, pkg := range c.Binaries {
		if def := defaultBinaryName(pkg); def != name {
			if err := os.Rename(filepath.Join(tmp, def), filepath.Join(tmp, name)); err != nil {
				return fmt.Errorf("name %s binary: %w", c.Name, err)
			}
		}
	}
	bin := filepath.Join(dir, "bin")
	if err := os.RemoveAll(bin); err != nil {
		return fmt.Errorf("replace %s: %w", bin, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("install %s: %w", c.Name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, stampFile), []byte(stamp), 0o644); err != nil {
		return fmt.Errorf("write build stamp: %w", err)
	}
	fmt.Fprintf(o.Progress, "built %s %s in %s\n", c.Name, c.Version, time.Since(start).Round(time.Second))
	return nil
}

func (c Component) complete(cacheRoot string) bool {
	for name := range c.Binaries {
		if _, err := os.Stat(c.Bin(cacheRoot, name)); err != nil {
			return false
		}
	}
	return true
}

// stamp hashes the helper module's go.mod and go.sum, then its own .go
// files in name order: a different pin or code means a different build
// under the same version key. (A module with no .go files hashes as before.)
func (c Component) stamp(modDir string) (string, error) {
	h := sha256.New()
	files := []string{"go.mod", "go.sum"}
	code, err := filepath.Glob(filepath.Join(modDir, "*.go"))
	if err != nil {
		return "", err
	}
	for _, f := range sortStrings(code) {
		files = append(files, filepath.Base(f))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return "", fmt.Errorf("read helper module of %s: %w", c.Name, err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ticker prints a heartbeat every 30s while a long build runs.
func ticker(w io.Writer, name string, start time.Time) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "  still building %s (%s elapsed)\n", name, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done) }
}

// defaultBinaryName is the name go build gives the binary of pkg: its last
// element, or the one before a major version suffix such as /v3.
func defaultBinaryName(pkg string) string {
	elems := strings.Split(pkg, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		return elems[len(elems)-2]
	}
	return last
}

// RepoRoot walks up from dir to the directory holding the flock go.mod.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/flockd/flock\n") {
			return d, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("find repository root: %w", err)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no github.com/flockd/flock go.mod above %s", dir)
		}
	}
}
