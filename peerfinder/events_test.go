package peerfinder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/peer"
)

// The bootstrap timeout is said as a BootstrapTimeout Event where Main
// decides the exit status 3; no other outcome is an Event there.
func TestExitStatusEmitsBootstrapTimeout(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	timeout := fmt.Errorf("%w: 2 of 5 peers", engine.ErrBootstrapTimeout)
	for _, tt := range []struct {
		err  error
		code int
		want []events.Event
	}{
		{timeout, ExitBootstrapTimeout, []events.Event{events.BootstrapTimeout(timeout)}},
		{nil, ExitOK, nil},
		{errNotDelivered, ExitNotDelivered, nil},
		{errors.New("boom"), ExitError, nil},
	} {
		evs := &events.Recording{}
		if code := exitStatus(tt.err, log, evs, io.Discard); code != tt.code || !slices.Equal(evs.Events(), tt.want) {
			t.Errorf("exitStatus(%v) = %d with events %+v; want %d with %+v", tt.err, code, evs.Events(), tt.code, tt.want)
		}
	}
}

// The API sources and the -expect=auto parts are built with the Emitter: a
// forbidden list of either source is one Forbidden Event naming its
// resource and the grant, and the Roler and Replicas get the Emitter.
func TestBuildWiresEvents(t *testing.T) {
	cfg := &config.Config{Service: "web", Namespace: "db", Domain: "cluster.local"}
	cfg.Kube.Sources = []string{config.SourceEndpointSlice, config.SourcePods}
	cfg.Kube.Selector = "app=web"
	cfg.Bootstrap.ExpectAuto, cfg.Bootstrap.PodName = true, "web-0"
	c := fake.NewClientset()
	c.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: a.GetResource().Resource}, "", errors.New("RBAC says no"))
	})
	kc := &kubeClient{}
	kc.once.Do(func() { kc.c = clientset.Wrap(c) })
	evs := &events.Recording{}
	log := slog.New(slog.DiscardHandler)
	srcs, err := buildSources(cfg, log, nil, kc, evs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, len(srcs))
	for _, s := range srcs {
		go func() { done <- s.Source.Run(ctx, make(chan []peer.Peer)) }()
	}
	await.Until(t, func() bool { return len(evs.Events()) == 2 }, "a Forbidden Event from each source; got %v", evs)
	cancel()
	for range srcs {
		await.Recv(t, done, "a source to return after cancel")
	}
	var resources []string
	for _, e := range evs.Events() {
		if e.Reason != events.ReasonForbidden || e.Action != "Discover" || !strings.Contains(e.Note, "in namespace db; grant list,watch: kubectl") {
			t.Errorf("event %+v, want Forbidden while discovering, naming what to grant", e)
		}
		resources = append(resources, strings.Fields(e.Note)[5])
	}
	if slices.Sort(resources); !slices.Equal(resources, []string{"endpointslices.discovery.k8s.io", "pods"}) {
		t.Errorf("Forbidden Events for %v, want one for each source's resource", resources)
	}
	boot, err := buildBootstrap(cfg, log, nil, kc, evs)
	if err != nil {
		t.Fatal(err)
	}
	if boot.roler.Events != evs || boot.replicas.Events != evs || boot.replicas.OnForbidden == nil {
		t.Errorf("bootstrap parts without the Emitter: roler %v, replicas %v, %v", boot.roler.Events, boot.replicas.Events, boot.replicas.OnForbidden != nil)
	}
}
