// Package kubesources tests the Kubernetes API sources (and the DNS source,
// side by side) against the real local cluster: kube-apiserver,
// kube-controller-manager's EndpointSlice and StatefulSet controllers, kwok
// pods and CoreDNS.
package kubesources

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/testing/sourcetest"
	"github.com/flockd/flock/internal/testing/syncbuf"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
	dnssource "github.com/flockd/flock/peerfinder/source/dns"
	"github.com/flockd/flock/peerfinder/source/endpointslice"
	"github.com/flockd/flock/peerfinder/source/pods"
)

const wait = 90 * time.Second // bounds a hang; not a performance assertion

// watcher is a source running in the test, by name.
type watcher struct {
	*sourcetest.Run
	name string
}

func run(t *testing.T, name string, src source.Source) *watcher {
	t.Helper()
	return &watcher{Run: sourcetest.Start(t, name, src), name: name}
}

// names is the sorted list of first labels of the peers' FQDNs.
func names(ps []peer.Peer) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, strings.SplitN(p.FQDN, ".", 2)[0])
	}
	slices.Sort(out)
	return out
}

// waitNames waits until the latest snapshot of w has exactly want.
func (w *watcher) waitNames(t *testing.T, want ...string) []peer.Peer {
	t.Helper()
	slices.Sort(want)
	if want == nil {
		want = []string{}
	}
	return w.Wait(t, wait, fmt.Sprint(want), func(ps []peer.Peer) bool { return slices.Equal(names(ps), want) })
}

func ordinals(prefix string, n ...int) []string {
	out := make([]string, len(n))
	for i, o := range n {
		out[i] = fmt.Sprintf("%s-%d", prefix, o)
	}
	return out
}

func upto(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

type sources struct {
	endpointslice, endpointsliceNotReady, pods, podsNotReady, dns *watcher
}

// start runs every source for service "web" in ns.
func start(t *testing.T, c *clustertest.Cluster, ns string, log *slog.Logger) sources {
	t.Helper()
	client, err := kube.NewClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	es := func(notReady bool) source.Source {
		s, err := endpointslice.New(endpointslice.Config{Client: client, Logger: log,
			Options: endpointslice.Options{Service: "web", Namespace: ns, Domain: c.Domain, IncludeNotReady: notReady}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ps := func(notReady bool) source.Source {
		s, err := pods.New(pods.Config{Client: client, Logger: log, Selector: "app=web",
			Options: pods.Options{Service: "web", Namespace: ns, Domain: c.Domain, IncludeNotReady: notReady}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	d, err := dnssource.New(dnssource.Config{Name: "web." + ns + ".svc." + c.Domain, Servers: []string{c.DNSAddr},
		Period: 100 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return sources{
		endpointslice:         run(t, "endpointslice", es(false)),
		endpointsliceNotReady: run(t, "endpointslice -include-not-ready", es(true)),
		pods:                  run(t, "pods", ps(false)),
		podsNotReady:          run(t, "pods -include-not-ready", ps(true)),
		dns:                   run(t, "dns", d),
	}
}

func (s sources) all() []*watcher {
	return []*watcher{s.endpointslice, s.endpointsliceNotReady, s.pods, s.podsNotReady, s.dns}
}

// logBuffer is a goroutine-safe log sink for tests that read the log.
type logBuffer struct{ syncbuf.Buffer }

func (l *logBuffer) lines(substr string) []string {
	var out []string
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

func testLogger(t *testing.T, w *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
