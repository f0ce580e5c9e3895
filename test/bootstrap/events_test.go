package bootstrap

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/internal/testing/syncbuf"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/events/recorder"
)

// TestEventsOnOwnPod runs peer-finder as a ServiceAccount with the example
// RBAC (events.yaml included) and reads the Events it posts on its pod from
// the real API server: the bootstrap role, a hook failing and then
// recovering, the first delivery, then, in other runs, the bootstrap
// timeout and a forbidden source. Each Event is reported by peer-finder,
// regards pod web-0 by UID (so kubectl describe pod shows it) and is posted
// once although the failing hook was retried.
func TestEventsOnOwnPod(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{})
	web0 := fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
	for _, f := range []string{"serviceaccount.yaml", "endpointslice.yaml", "cluster-lease.yaml", "events.yaml"} {
		applyExample(t, c, ns, f)
	}
	kubeconfig := serviceAccountKubeconfig(t, c, ns)
	// peer-finder routes client-go's global klog logger on its first run in
	// a process: do that before this test's own client runs beside it.
	(pf{c: c, ns: ns, pod: "web-0", args: []string{"-kubeconfig=" + kubeconfig, "-source=endpointslice", "-events=off"}}).main(t.Context(), "-diagnose")

	// A hook that fails until the file ok exists.
	dir := t.TempDir()
	script := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\n[ -e "+filepath.Join(dir, "ok")+" ] || { echo not yet >&2; exit 1; }\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := pf{c: c, ns: ns, pod: "web-0", args: []string{"-kubeconfig=" + kubeconfig, "-source=endpointslice", "-include-not-ready",
		"-expect=2", "-cluster-lease=db-cluster", "-on-change=/bin/sh " + script}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		code, _, _ := p.main(ctx)
		done <- code
	}()
	waitEvents(t, c, ns, "SinkFailing")
	if err := os.WriteFile(filepath.Join(dir, "ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	evs := waitEvents(t, c, ns, "SinkRecovered", "PeersDelivered", "BootstrapRole")
	cancel()
	if code := await.Recv(t, done, "peer-finder to exit after cancel"); code != peerfinder.ExitOK {
		t.Errorf("peer-finder exited %d", code)
	}
	for _, e := range evs {
		if e.ReportingController != events.Controller || e.Regarding.Kind != "Pod" || e.Regarding.Name != "web-0" || e.Regarding.UID != web0.UID {
			t.Errorf("event %s: reported by %q about %s %s uid %s; want peer-finder about pod web-0 uid %s",
				e.Reason, e.ReportingController, e.Regarding.Kind, e.Regarding.Name, e.Regarding.UID, web0.UID)
		}
	}
	byReason := map[string][]eventsv1.Event{}
	for _, e := range evs {
		byReason[e.Reason] = append(byReason[e.Reason], e)
	}
	if f := byReason["SinkFailing"]; len(f) != 1 || f[0].Type != "Warning" || !strings.Contains(f[0].Note, "hook") {
		t.Errorf("SinkFailing events %+v, want one Warning naming the hook", f)
	}
	if r := byReason["BootstrapRole"]; len(r) != 1 || !strings.HasPrefix(r[0].Note, "form (") {
		t.Errorf("BootstrapRole events %+v, want one saying form", r)
	}
	if d := byReason["PeersDelivered"]; len(d) != 1 || !strings.Contains(d[0].Note, "2 peers") {
		t.Errorf("PeersDelivered events %+v, want one with 2 peers", d)
	}

	// Init mode that times out: the Event is sent before the exit.
	code, _, stderr := p.main(t.Context(), "-on-start=/bin/true", "-on-change=", "-expect=5", "-bootstrap-timeout=2s")
	if code != peerfinder.ExitBootstrapTimeout {
		t.Fatalf("exit %d, want %d:\n%s", code, peerfinder.ExitBootstrapTimeout, stderr)
	}
	waitEvents(t, c, ns, "BootstrapTimeout")

	// A source RBAC forbids (pods: not granted) is a Warning Event too.
	p.args = []string{"-kubeconfig=" + kubeconfig, "-source=pods", "-selector=app=web", "-on-start=/bin/true", "-bootstrap-timeout=3s"}
	if code, _, stderr := p.main(t.Context()); code != peerfinder.ExitBootstrapTimeout {
		t.Fatalf("exit %d, want %d:\n%s", code, peerfinder.ExitBootstrapTimeout, stderr)
	}
	for _, e := range waitEvents(t, c, ns, "Forbidden") {
		if e.Reason == "Forbidden" && (e.Type != "Warning" || !strings.Contains(e.Note, " pods in namespace "+ns) || !strings.Contains(e.Note, "grant list,watch")) {
			t.Errorf("Forbidden event %q %q, want a Warning naming pods and the verbs to grant", e.Type, e.Note)
		}
	}
}

// TestEventsDeduplicatedAndForbiddenIsQuiet posts the same Event five times
// through a Recorder on the real API server: it stays one Event, with a
// series (client-go writes the series' count once at the first repeat and
// then at most every few minutes). Without RBAC for Events, peer-finder says so once
// and delivers as before.
func TestEventsDeduplicatedAndForbiddenIsQuiet(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 1, fixture.StatefulSetOptions{})
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")

	var logs syncbuf.Buffer
	kc, err := kube.NewClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	r := recorder.Start(t.Context(), kc, ns, "web-0", "", slog.New(slog.NewTextHandler(&logs, nil)))
	failing := events.SinkFailing("hook", errors.New("exit status 1"))
	r.Emit(failing)
	waitEvents(t, c, ns, "SinkFailing")
	for range 4 {
		r.Emit(failing)
	}
	r.Stop()
	evs := waitEvents(t, c, ns, "SinkFailing")
	if len(evs) != 1 {
		t.Fatalf("%d events for 5 identical posts, want 1: %+v", len(evs), evs)
	}
	if evs[0].Series == nil || evs[0].Series.Count < 2 {
		t.Errorf("series %+v, want the repeats counted", evs[0].Series)
	}
	t.Logf("5 posts: 1 event, series %+v; recorder log: %s", evs[0].Series, logs.String())

	// No RBAC for events (only endpointslices): delivery as usual, one line.
	applyExample(t, c, ns, "serviceaccount.yaml")
	applyExample(t, c, ns, "endpointslice.yaml")
	h := newHook(t)
	p := pf{c: c, ns: ns, pod: "web-0", args: []string{"-kubeconfig=" + serviceAccountKubeconfig(t, c, ns), "-source=endpointslice", "-include-not-ready", "-on-start=" + h.command()}}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	code, _, stderr := p.main(ctx)
	if ds := h.deliveries(t); code != peerfinder.ExitOK || len(ds) != 1 {
		t.Fatalf("exit %d, deliveries %v:\n%s", code, ds, stderr)
	}
	var forbidden []logtest.Record
	for _, r := range logtest.ParseText(stderr) {
		if strings.HasPrefix(r.Message, "cannot post events on this pod: the API server says forbidden") {
			forbidden = append(forbidden, r)
		}
	}
	if len(forbidden) != 1 || forbidden[0].Level != slog.LevelWarn {
		t.Errorf("records about events being forbidden %v, want one warning:\n%s", forbidden, stderr)
	}
}

// waitEvents waits until peer-finder's Events in ns include every reason
// and returns them all.
func waitEvents(t *testing.T, c *clustertest.Cluster, ns string, reasons ...string) []eventsv1.Event {
	t.Helper()
	var got []eventsv1.Event
	c.WaitFor(t, "events "+strings.Join(reasons, ", "), wait, func(ctx context.Context) (bool, error) {
		l, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = got[:0]
		var seen []string
		for _, e := range l.Items {
			if e.ReportingController == events.Controller {
				got = append(got, e)
				seen = append(seen, e.Reason)
			}
		}
		for _, r := range reasons {
			if !slices.Contains(seen, r) {
				return false, nil
			}
		}
		return true, nil
	})
	return got
}
