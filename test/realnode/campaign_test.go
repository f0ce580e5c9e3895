package realnode

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flockd/flock/localcluster/apps"
)

// TestCampaignSmoke runs two rounds of bench/campaign per application
// (apps.Apps: etcd, zookeeper, redis, galera, each its example under its own
// oracle) for flock only, under the same fault schedule (start skew, a
// member killed mid-bootstrap, a scale-up during bootstrap, member 0's data
// lost once healthy and marked, members spread over the real nodes), the
// applications and rounds in parallel, and fails on any split brain or
// stuck round. The API server restarts, CoreDNS cache and outages and node
// faults of the full campaign are left out: other packages share this
// cluster. FLOCK_CAMPAIGN_SEED replays a schedule.
func TestCampaignSmoke(t *testing.T) {
	t.Parallel() // its own namespaces; a few minutes
	b := newBed(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOCK_CAMPAIGN_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FLOCK_CAMPAIGN_SEED: %v", err)
		}
	}
	t.Logf("seed %d (FLOCK_CAMPAIGN_SEED=%d replays it)", seed, seed)
	for _, name := range slices.Sorted(maps.Keys(apps.Apps)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			manifests, err := apps.Manifests(repoPath(t, "examples/apps/"+name))
			if err != nil {
				t.Fatal(err)
			}
			c := &apps.Campaign{Config: b.Config, Client: b.Client, App: apps.Apps[name], Manifests: manifests,
				Stall: apps.StallFor(name), Deadline: apps.DefaultDeadline, LogDir: t.TempDir(), Edit: apps.ForRealNode}
			const rounds = 2
			var wg sync.WaitGroup
			outs := make([]apps.Outcome, rounds)
			start := time.Now()
			for r := range rounds {
				wg.Go(func() { outs[r] = c.Run(context.Background(), apps.Flock, apps.NewPlan(seed, r, 3)) })
			}
			wg.Wait()
			for _, o := range outs {
				switch {
				case o.Split:
					t.Errorf("%s: split brain: %s (logs in %s/%s)", o.Plan, o.Detail, c.LogDir, o.NS)
				case o.Aborted:
					t.Errorf("%s: could not run: %s", o.Plan, o.Detail)
				case o.Stuck:
					t.Errorf("%s: stuck: %s (logs in %s/%s)", o.Plan, o.Detail, c.LogDir, o.NS)
				default:
					t.Logf("%s: healthy after %s, rejoin %s", o.Plan, o.Healthy.Round(time.Second), o.Rejoin.Round(time.Second))
				}
			}
			t.Logf("%d rounds in %s", rounds, time.Since(start).Round(time.Second))
			if t.Failed() {
				logDir(t, c.LogDir)
			}
		})
	}
}

// logDir logs the files under dir (a failed round's container logs).
func logDir(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		files, _ := os.ReadDir(dir + "/" + e.Name())
		for _, f := range files {
			b, _ := os.ReadFile(dir + "/" + e.Name() + "/" + f.Name())
			t.Logf("--- %s/%s:\n%s", e.Name(), f.Name(), brief(string(b)))
		}
	}
}
