package bootstrap

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/localcluster/clustertest"
	flockbootstrap "github.com/flockd/flock/peerfinder/bootstrap"
	"github.com/flockd/flock/peerfinder/peer"
)

// TestRolerClaimRaceExactlyOneForms has many members ask for their role at
// the same moment against the real API server, each with its own client, in
// many rounds (a fresh Lease each): in every round exactly one is told form,
// it is the one the Lease names, and every other member is told join. Even
// rounds are members without an ordinal (elected by the Lease); odd rounds
// are pods that all call themselves web-0 (a re-created pod-0 racing its
// predecessor), which the ordinal rule alone would all tell form. Every
// third round starts from an existing Lease that names nobody, so the
// claims race on update instead of create. Every member is given the one
// that formed as its former.
func TestRolerClaimRaceExactlyOneForms(t *testing.T) {
	const rounds, members = 50, 10
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	// Lost writes (AlreadyExists on create, Conflict on update) are 409s:
	// counted to show that the claims really collided.
	var lost atomic.Int64
	clients := make([]kubernetes.Interface, members)
	for i := range clients {
		cfg := rest.CopyConfig(c.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(r)
				if err == nil && resp.StatusCode == http.StatusConflict {
					lost.Add(1)
				}
				return resp, err
			})
		})
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = cs
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	for round := range rounds {
		lease := fmt.Sprintf("race-%d", round)
		sameName := round%2 == 1
		if round%3 == 2 {
			// The Lease exists but names nobody (an operator cleared it):
			// the claims race on update, not create.
			empty := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease, Namespace: ns}}
			if _, err := c.Client.CoordinationV1().Leases(ns).Create(ctx, empty, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ps := make([]peer.Peer, members)
		selves := make([]string, members)
		rolers := make([]*flockbootstrap.Roler, members)
		for i := range members {
			pod, ordinal := fmt.Sprintf("m-%d", i), -1
			if sameName {
				pod, ordinal = "web-0", 0
			}
			ps[i] = peer.Peer{FQDN: fmt.Sprintf("m-%d.web.%s.svc.%s", i, ns, c.Domain), Name: pod, Ordinal: ordinal, Ready: true}
			selves[i] = ps[i].FQDN
			rolers[i] = &flockbootstrap.Roler{
				Lease: &flockbootstrap.Lease{Leases: clientset.Wrap(clients[i]).Leases, Namespace: ns, Name: lease},
				Pod:   pod, UID: fmt.Sprintf("uid-%d-%d", round, i),
			}
		}
		roles, formers := make([]string, members), make([]string, members)
		errs := make([]error, members)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range members {
			// Each member sees only itself, as a member without a visible
			// lower ordinal does.
			set := peer.NewSet(ps[i])
			wg.Go(func() {
				<-start
				roles[i], formers[i], errs[i] = rolers[i].Bootstrap(ctx, set, selves[i])
			})
		}
		close(start)
		wg.Wait()
		var formed []int
		for i := range members {
			if errs[i] != nil {
				t.Fatalf("round %d: member %d: %v", round, i, errs[i])
			}
			switch roles[i] {
			case "form":
				formed = append(formed, i)
			case "join":
			default:
				t.Fatalf("round %d: member %d told %q", round, i, roles[i])
			}
		}
		if len(formed) != 1 {
			t.Fatalf("round %d (same name %v): members %v told form, want exactly one (roles %v)", round, sameName, formed, roles)
		}
		rec, err := rolers[0].Lease.Read(ctx)
		if err != nil || rec == nil {
			t.Fatalf("round %d: read lease: %v, %v", round, rec, err)
		}
		if want := fmt.Sprintf("uid-%d-%d", round, formed[0]); rec.UID != want {
			t.Fatalf("round %d: lease names uid %s, but member %d (uid %s) was told form", round, rec.UID, formed[0], want)
		}
		// Every member targets the one that formed (PEER_FINDER_FORMER).
		for i, f := range formers {
			if f != selves[formed[0]] {
				t.Fatalf("round %d: member %d (%s) was given former %q, want %s", round, i, roles[i], f, selves[formed[0]])
			}
		}
	}
	if lost.Load() == 0 {
		t.Fatalf("no claim lost a write in %d rounds: the claims never collided, so this test did not race", rounds)
	}
	t.Logf("%d rounds of %d concurrent claims: exactly one form in each; %d writes lost the race", rounds, members, lost.Load())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
