package membership

import (
	"testing"
	"time"

	"github.com/flockd/flock/peerfinder/peer"
)

// TestStableForRestartsOnAnyChange feeds Compute a sequence of sets whose
// size never changes: another member in place of one, then a new IP for a
// member. Each change restarts the stable-for window; only a set left
// unchanged for the whole window is published.
func TestStableForRestartsOnAnyChange(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const window = 5 * time.Second
	withIP := func(ip string, names ...string) []peer.Peer {
		ps := peers(names...)
		for i := range ps {
			ps[i].IPs = []string{ip}
		}
		return ps
	}
	opts := Options{Self: "web-0.web.ns.svc.cluster.local", StableFor: window}
	steps := []struct {
		name        string
		at          time.Duration
		peers       []peer.Peer
		want        Reason
		wantSince   time.Duration
		wantRecheck time.Duration
	}{
		{"first set", 0, withIP("10.0.0.1", "web-0", "web-1"), WaitStable, 0, window},
		{"same size, another member", 4 * time.Second, withIP("10.0.0.1", "web-0", "web-2"), WaitStable, 4 * time.Second, window},
		{"unchanged, inside the new window", 8 * time.Second, withIP("10.0.0.1", "web-0", "web-2"), WaitStable, 4 * time.Second, time.Second},
		{"same members, a new IP", 8500 * time.Millisecond, withIP("10.0.0.9", "web-0", "web-2"), WaitStable, 8500 * time.Millisecond, window},
		{"a member becomes not ready", 10 * time.Second, func() []peer.Peer {
			ps := withIP("10.0.0.9", "web-0", "web-2")
			ps[1].Ready = false
			return ps
		}(), WaitStable, 10 * time.Second, window},
		{"unchanged for the whole window", 15 * time.Second, func() []peer.Peer {
			ps := withIP("10.0.0.9", "web-0", "web-2")
			ps[1].Ready = false
			return ps
		}(), Publish, 10 * time.Second, 0},
	}
	var obs Observation
	for _, s := range steps {
		views := []View{{Source: "dns", Reported: true, Peers: s.peers}}
		_, o, v := Compute(views, opts, obs, t0.Add(s.at))
		obs = o
		if v.Reason != s.want || !obs.Since.Equal(t0.Add(s.wantSince)) || v.RecheckAfter != s.wantRecheck {
			t.Fatalf("%s (t0+%s): verdict %s (%s), stable since t0+%s, recheck after %s; want %s since t0+%s, recheck after %s",
				s.name, s.at, v.Reason, v.Detail, obs.Since.Sub(t0), v.RecheckAfter, s.want, s.wantSince, s.wantRecheck)
		}
	}
}
