package bootstrap

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/events"
	"github.com/flockd/flock/peerfinder/peer"
)

// The Roler says each decided or changed role as a BootstrapRole Event,
// and nothing when the role stays.
func TestRolerEmitsEachNewRole(t *testing.T) {
	var first atomic.Int64
	evs := &events.Recording{}
	r := &Roler{Pod: "db-1", FirstOrdinal: func() int { return int(first.Load()) }, Events: evs}
	both, alone := peer.NewSet(member("db-0", 0), member("db-1", 1)), peer.NewSet(member("db-1", 1))
	var want []events.Event
	for i, set := range []peer.Set{both, both, alone, alone} {
		if i == 2 {
			first.Store(1) // ordinals start at 1: db-1 is the first
		}
		role, err := r.Role(t.Context(), set, fqdn("db-1"))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 || i == 2 { // decided, changed
			want = append(want, events.BootstrapRole(role, string(r.last.Reason), r.last.Detail))
		}
	}
	if got := evs.Events(); !slices.Equal(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
	if len(want) != 2 || want[0].Note == want[1].Note {
		t.Errorf("the role did not change: %+v", want)
	}
}

// Replicas says a forbidden read of its own pod as a Forbidden Event (and
// not another failure), and hands a forbidden StatefulSet watch to
// OnForbidden as the sources do.
func TestReplicasEmitsForbidden(t *testing.T) {
	ss := statefulSet("db", 3)
	c := fake.NewClientset(ss, ownedPod("db-0", ss))
	ownPodForbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "db-0",
		errors.New(`User "system:serviceaccount:ns:db" cannot get resource "pods" in API group "" in the namespace "ns"`))
	var gets atomic.Int32
	c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		switch gets.Add(1) {
		case 1:
			return true, nil, ownPodForbidden
		case 2:
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	c.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "", errForbiddenDetail)
	})
	evs := &events.Recording{}
	watch := make(chan kube.Forbidden, 10)
	r := newReplicasForTest(c, nil)
	r.RetryMin, r.RetryMax = 1, 2
	r.Events, r.OnForbidden = evs, func(f kube.Forbidden) { watch <- f }
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx, make(chan int)) }()
	f := await.Recv(t, watch, "OnForbidden for the StatefulSet list")
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
	if f.Verb != "list" || f.Resource != "statefulsets.apps" || f.Namespace != "ns" || f.Needs != "list,watch" {
		t.Errorf("OnForbidden(%+v), want list statefulsets.apps in ns, needs list,watch", f)
	}
	got := evs.Events()
	if len(got) != 1 || got[0] != events.OwnPodForbidden(ownPodForbidden) {
		t.Errorf("events %+v, want one Forbidden for the own pod (the connection refused is none)", got)
	}
}
