package membership

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/peerfinder/peer"
)

func peers(names ...string) []peer.Peer {
	ps := make([]peer.Peer, len(names))
	for i, n := range names {
		ps[i] = peer.Peer{FQDN: n + ".web.ns.svc.cluster.local", Name: n, Ready: true, Ordinal: -1}
	}
	return ps
}

func TestCompute(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	self := "web-0.web.ns.svc.cluster.local"
	three := peer.NewSet(peers("web-0", "web-1", "web-2")...)
	tests := []struct {
		name        string
		views       []View
		opts        Options
		last        Observation
		now         time.Time
		want        Reason
		wantPeers   int
		wantSince   time.Time
		wantRecheck time.Duration
	}{
		{name: "no sources", want: WaitSources, now: t0, wantSince: t0},
		{name: "source not reported", views: []View{{Source: "dns"}}, opts: Options{Self: self}, now: t0, want: WaitSources, wantSince: t0},
		{name: "one of two sources not reported",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0")}, {Source: "pods"}},
			opts:  Options{Self: self}, now: t0, want: WaitSources, wantPeers: 1, wantSince: t0},
		{name: "authoritative empty never publishes",
			views: []View{{Source: "dns", Reported: true}}, now: t0, want: WaitEmpty, wantSince: t0},
		{name: "self missing", views: []View{{Source: "dns", Reported: true, Peers: peers("web-1", "web-2")}},
			opts: Options{Self: self}, now: t0, want: WaitSelf, wantPeers: 2, wantSince: t0},
		{name: "self present publishes", views: []View{{Source: "dns", Reported: true, Peers: peers("web-0")}},
			opts: Options{Self: self}, now: t0, want: Publish, wantPeers: 1, wantSince: t0},
		{name: "first node alone publishes", views: []View{{Source: "dns", Reported: true, Peers: peers("web-0")}},
			opts: Options{Self: self, MinPeers: 1}, now: t0, want: Publish, wantPeers: 1, wantSince: t0},
		{name: "self gate off", views: []View{{Source: "dns", Reported: true, Peers: peers("web-1")}},
			now: t0, want: Publish, wantPeers: 1, wantSince: t0},
		{name: "min peers holds", views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1")}},
			opts: Options{Self: self, MinPeers: 3}, now: t0, want: WaitSize, wantPeers: 2, wantSince: t0},
		{name: "expect holds", views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1")}},
			opts: Options{Self: self, MinPeers: 1, Expect: 3}, now: t0, want: WaitSize, wantPeers: 2, wantSince: t0},
		{name: "expected size pending holds even when enough peers are visible",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1", "web-2")}},
			opts:  Options{Self: self, ExpectPending: true}, now: t0, want: WaitExpect, wantPeers: 3, wantSince: t0},
		{name: "expected names missing hold",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1")}},
			opts:  Options{Self: self, Missing: namesGate("web-0", "web-1", "web-2")}, now: t0, want: WaitNames, wantPeers: 2, wantSince: t0},
		{name: "expected names missing after a publish no longer hold (a retried pod)",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1")}},
			opts:  Options{Self: self, Missing: namesGate("web-0", "web-1", "web-2"), Published: true}, now: t0, want: Publish, wantPeers: 2, wantSince: t0},
		{name: "expected names all present publish",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1", "web-2")}},
			opts:  Options{Self: self, Missing: namesGate("web-0", "web-1", "web-2")}, now: t0, want: Publish, wantPeers: 3, wantSince: t0},
		{name: "size gate before names gate",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0")}},
			opts:  Options{Self: self, Expect: 3, Missing: namesGate("web-0", "web-1", "web-2")}, now: t0, want: WaitSize, wantPeers: 1, wantSince: t0},
		{name: "expect met", views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1", "web-2")}},
			opts: Options{Self: self, Expect: 3}, now: t0, want: Publish, wantPeers: 3, wantSince: t0},
		{name: "union of sources dedups by key",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1")}, {Source: "pods", Reported: true, Peers: peers("web-1", "web-2")}},
			opts:  Options{Self: self, Expect: 3}, now: t0, want: Publish, wantPeers: 3, wantSince: t0},
		{name: "new set starts the stable window",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1", "web-2")}},
			opts:  Options{Self: self, StableFor: 5 * time.Second},
			last:  Observation{Set: peer.NewSet(peers("web-0")...), Since: t0},
			now:   t0.Add(time.Minute), want: WaitStable, wantPeers: 3, wantSince: t0.Add(time.Minute), wantRecheck: 5 * time.Second},
		{name: "unchanged set inside the window waits for the rest",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1", "web-2")}},
			opts:  Options{Self: self, StableFor: 5 * time.Second},
			last:  Observation{Set: three, Since: t0},
			now:   t0.Add(2 * time.Second), want: WaitStable, wantPeers: 3, wantSince: t0, wantRecheck: 3 * time.Second},
		{name: "unchanged set after the window publishes",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-0", "web-1", "web-2")}},
			opts:  Options{Self: self, StableFor: 5 * time.Second},
			last:  Observation{Set: three, Since: t0},
			now:   t0.Add(5 * time.Second), want: Publish, wantPeers: 3, wantSince: t0},
		{name: "self gate is checked before stability",
			views: []View{{Source: "dns", Reported: true, Peers: peers("web-1", "web-2")}},
			opts:  Options{Self: self, StableFor: time.Second}, now: t0, want: WaitSelf, wantPeers: 2, wantSince: t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, obs, v := Compute(tt.views, tt.opts, tt.last, tt.now)
			if v.Reason != tt.want {
				t.Errorf("reason = %s (%s), want %s", v.Reason, v.Detail, tt.want)
			}
			if set.Len() != tt.wantPeers || v.Peers != tt.wantPeers {
				t.Errorf("set has %d peers (verdict %d), want %d", set.Len(), v.Peers, tt.wantPeers)
			}
			if !obs.Since.Equal(tt.wantSince) || !obs.Set.Equal(set) {
				t.Errorf("observation = %v since %v, want the set since %v", obs.Set.Keys(), obs.Since, tt.wantSince)
			}
			if v.RecheckAfter != tt.wantRecheck {
				t.Errorf("recheck after %v, want %v", v.RecheckAfter, tt.wantRecheck)
			}
			if v.Publishable() != (tt.want == Publish) {
				t.Errorf("Publishable() = %v", v.Publishable())
			}
			if v.Preview != (tt.want == WaitNames) {
				t.Errorf("Preview = %v with reason %s: only a set the names gate alone holds is previewed", v.Preview, v.Reason)
			}
			if v.Reason != Publish && v.Detail == "" {
				t.Errorf("waiting verdict has no detail")
			}
			if v.Publishable() && (set.Len() == 0 || (tt.opts.Self != "" && !set.Has(tt.opts.Self))) {
				t.Errorf("published a set that is empty or lacks self: %v", set.Keys())
			}
		})
	}
}

func TestOutgrown(t *testing.T) {
	two := peer.NewSet(peers("web-0", "web-1")...)
	for need, want := range map[int]bool{1: false, 2: false, 3: true} {
		if got := Outgrown(two, need); got != want {
			t.Errorf("Outgrown(2 peers, need %d) = %v, want %v", need, got, want)
		}
	}
}

// TestComputeNeverPublishesUnsafeSets checks the invariants over many
// combinations of views and options.
func TestComputeNeverPublishesUnsafeSets(t *testing.T) {
	names := []string{"web-0", "web-1", "web-2", "web-3"}
	self := "web-0.web.ns.svc.cluster.local"
	t0 := time.Unix(0, 0)
	for mask := 0; mask < 1<<len(names); mask++ {
		var in []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				in = append(in, n)
			}
		}
		for minPeers := 0; minPeers <= 5; minPeers++ {
			set, _, v := Compute([]View{{Source: "s", Reported: true, Peers: peers(in...)}}, Options{Self: self, MinPeers: minPeers}, Observation{}, t0)
			if !v.Publishable() {
				continue
			}
			if set.Len() == 0 || !set.Has(self) || set.Len() < minPeers {
				t.Fatalf("published %v with min %d", set.Keys(), minPeers)
			}
		}
	}
}

func BenchmarkCompute5000(b *testing.B) {
	names := make([]string, 5000)
	for i := range names {
		names[i] = "web-" + strconv.Itoa(i)
	}
	views := []View{{Source: "dns", Reported: true, Peers: peers(names...)}}
	opts := Options{Self: "web-0.web.ns.svc.cluster.local", Expect: 5000}
	now := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		_, _, v := Compute(views, opts, Observation{}, now)
		if !v.Publishable() {
			b.Fatal(v.Detail)
		}
	}
}

// namesGate is an expected-names gate: the names whose first label no peer has.
func namesGate(names ...string) func(peer.Set) []string {
	return func(set peer.Set) []string {
		var missing []string
		for _, n := range names {
			found := false
			for _, p := range set.Peers() {
				if strings.HasPrefix(p.Key(), n+".") {
					found = true
				}
			}
			if !found {
				missing = append(missing, n)
			}
		}
		return missing
	}
}

func TestNamesGateVerdictNamesTheMissing(t *testing.T) {
	_, _, v := Compute([]View{{Source: "dns", Reported: true, Peers: peers("web-0")}},
		Options{Missing: namesGate("web-0", "web-2", "web-1")}, Observation{}, time.Now())
	if v.Reason != WaitNames || !slices.Equal(v.Missing, []string{"web-2", "web-1"}) || !strings.Contains(v.Detail, "web-2, web-1") {
		t.Errorf("verdict %+v, want %s naming web-2 and web-1", v, WaitNames)
	}
}
