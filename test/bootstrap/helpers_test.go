// Package bootstrap tests peer-finder's bootstrap safety against the real
// local cluster: -expect=auto following a StatefulSet, -bootstrap-timeout,
// the form/join role with a cluster Lease when pod-0 loses its data, and the
// example RBAC manifests with a real API server's authorizer. peer-finder
// runs in-process through peerfinder.Main with its real sources, and hooks
// are real child processes.
package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/syncbuf"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder"
	"github.com/flockd/flock/peerfinder/config"
)

const wait = 90 * time.Second // bounds a hang; not a performance assertion

// pf is one peer-finder run: the pod it plays and the flags it gets on top
// of the service, namespace, domain and DNS server.
type pf struct {
	c      *clustertest.Cluster
	ns     string
	pod    string
	podUID string // $POD_UID; empty: peer-finder reads its pod
	podIP  string // $POD_IP; set: no -service (API mode for Deployments and Jobs)
	args   []string
}

func (p pf) env() config.Env {
	vars := map[string]string{"POD_NAMESPACE": p.ns, "POD_NAME": p.pod, "POD_UID": p.podUID, "POD_IP": p.podIP}
	return config.Env{
		Getenv:     func(k string) string { return vars[k] },
		Hostname:   func() (string, error) { return p.pod, nil },
		ResolvConf: func() ([]byte, error) { return nil, os.ErrNotExist },
	}
}

// argv is the base flags, then p.args, then extra; a single-value flag
// given again replaces the earlier one (peer-finder refuses a flag given
// twice), and "-flag=" drops it.
func (p pf) argv(extra ...string) []string {
	base := []string{"-service=web", "-domain=" + p.c.Domain, "-dns-server=" + p.c.DNSAddr, "-poll-period=100ms"}
	if p.podIP != "" {
		base = base[1:]
	}
	all := slices.Concat(base, p.args, extra)
	name := func(a string) string { n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); return n }
	var out []string
	for i, a := range all {
		n := name(a)
		later := slices.ContainsFunc(all[i+1:], func(b string) bool { return name(b) == n })
		if n == "dns-server" || !later && !strings.HasSuffix(a, "=") {
			out = append(out, a)
		}
	}
	return out
}

// main runs peer-finder to completion and returns its exit status and output.
func (p pf) main(ctx context.Context, extra ...string) (int, string, string) {
	var stdout, stderr syncbuf.Buffer
	code := peerfinder.Main(ctx, p.argv(extra...), p.env(), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// hook is a recording hook script: every run writes the peers it got on
// stdin and PEER_FINDER_BOOTSTRAP to files named by PEER_FINDER_GENERATION.
type hook struct{ dir string }

func newHook(t *testing.T) hook {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
set -e
cat > "$1/$PEER_FINDER_GENERATION.peers"
printf '%s' "${PEER_FINDER_BOOTSTRAP-unset}" > "$1/$PEER_FINDER_GENERATION.tmp"
mv "$1/$PEER_FINDER_GENERATION.tmp" "$1/$PEER_FINDER_GENERATION.role"
`
	if err := os.WriteFile(filepath.Join(dir, "hook.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	return hook{dir: dir}
}

// command is the hook's command line for -on-start or -on-change.
func (h hook) command() string {
	return "/bin/sh " + filepath.Join(h.dir, "hook.sh") + " " + filepath.Join(h.dir, "out")
}

// delivery is one completed hook run.
type delivery struct {
	gen   int
	peers []string // first labels, sorted
	role  string
}

// deliveries returns the completed hook runs in generation order.
func (h hook) deliveries(t *testing.T) []delivery {
	t.Helper()
	out := filepath.Join(h.dir, "out")
	files, err := filepath.Glob(filepath.Join(out, "*.role"))
	if err != nil {
		t.Fatal(err)
	}
	var ds []delivery
	for _, f := range files {
		gen, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".role"))
		if err != nil {
			t.Fatal(err)
		}
		role, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := os.ReadFile(filepath.Join(out, strconv.Itoa(gen)+".peers"))
		if err != nil {
			t.Fatal(err)
		}
		d := delivery{gen: gen, role: string(role)}
		for line := range strings.Lines(string(stdin)) {
			d.peers = append(d.peers, strings.SplitN(strings.TrimSpace(line), ".", 2)[0])
		}
		slices.Sort(d.peers)
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b delivery) int { return a.gen - b.gen })
	return ds
}

// waitDelivery waits for a delivery of exactly the named peers and returns
// every delivery so far.
func (h hook) waitDelivery(t *testing.T, want ...string) []delivery {
	t.Helper()
	slices.Sort(want)
	var ds []delivery
	await.Poll{Timeout: wait, Every: 50 * time.Millisecond}.Check(t, func() error {
		if ds = h.deliveries(t); len(ds) == 0 || !slices.Equal(ds[len(ds)-1].peers, want) {
			return fmt.Errorf("deliveries: %v", ds)
		}
		return nil
	}, "a delivery of %v", want)
	return ds
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
