package status

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source/static"
)

func TestHeldBy(t *testing.T) {
	publish := membership.Verdict{Reason: membership.Publish, Peers: 3, Need: 3}
	hook := engine.SinkStatus{Name: "on-change", HoldsBack: true}
	for _, tc := range []struct {
		name string
		st   engine.Status
		want *Hold
	}{
		{"nothing evaluated yet", engine.Status{}, nil},
		{"delivered", engine.Status{Verdict: publish, Sinks: []engine.SinkStatus{hook}}, nil},
		{"size gate", engine.Status{Verdict: membership.Verdict{Reason: membership.WaitSize, Detail: "2 of 3 peers visible"}},
			&Hold{Gate: "too-few-peers", Detail: "2 of 3 peers visible"}},
		{"names gate says who is missing", engine.Status{Verdict: membership.Verdict{Reason: membership.WaitNames, Missing: []string{"web-2", "web-3"}}},
			&Hold{Gate: "expected-names-missing", Detail: "missing web-2, web-3"}},
		{"the verdict before a failing sink", engine.Status{
			Verdict: membership.Verdict{Reason: membership.WaitStable, Detail: "stable for 2s of 10s"},
			Sinks:   []engine.SinkStatus{{Name: "on-change", HoldsBack: true, Failing: true, Err: "exit status 1"}},
		}, &Hold{Gate: "not-stable-yet", Detail: "stable for 2s of 10s"}},
		{"outgrown", engine.Status{Verdict: publish, Held: true}, &Hold{Gate: GateOutgrown, Detail: "the expected size grew to 3 after the newest set was published"}},
		{"role pending", engine.Status{Verdict: publish, RoleErr: "bootstrap role: ranks awaited: db-1", RolePending: true},
			&Hold{Gate: GateRolePending, Detail: "bootstrap role: ranks awaited: db-1"}},
		{"role failing", engine.Status{Verdict: publish, RoleErr: "bootstrap role: forbidden"},
			&Hold{Gate: GateRole, Detail: "bootstrap role: forbidden"}},
		{"first sink that holds back", engine.Status{Verdict: publish, Sinks: []engine.SinkStatus{
			{Name: "hosts-file", Failing: true, Err: "locked"}, // holds nothing back: a note, not a gate
			{Name: "json-file", HoldsBack: true, Pending: true, Err: "waiting for the volume"},
			{Name: "on-change", HoldsBack: true, Failing: true, Err: "exit status 1"},
		}}, &Hold{Gate: GateSinkPending, Detail: "json-file: waiting for the volume"}},
		{"failing sink", engine.Status{Verdict: publish, Sinks: []engine.SinkStatus{{Name: "on-change", HoldsBack: true, Failing: true, Err: "exit status 1"}}},
			&Hold{Gate: GateSinkFailing, Detail: "on-change: exit status 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HeldBy(tc.st)
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("HeldBy = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	set := peer.NewSet(static.Names("db-0.db.ns.svc.cluster.local", "db-1.db.ns.svc.cluster.local")...)
	at := time.Date(2026, 12, 4, 23, 0, 0, 0, time.FixedZone("x", 3600))
	st := engine.Status{
		Verdict:    membership.Verdict{Reason: membership.WaitSize, Detail: "2 of 3 peers visible", Peers: 2, Need: 3},
		Generation: 2, Delivered: true,
		Last:  engine.Delivery{Set: set, Generation: 1, Role: "join", Former: "db-0.db.ns.svc.cluster.local", At: at},
		Sinks: []engine.SinkStatus{{Name: "on-change", HoldsBack: true, Failing: true, Err: errors.New("exit status 1").Error()}},
	}
	d := Build("db-1.db.ns.svc.cluster.local", st, []string{"hosts-file: another writer"})
	want := Delivered{Generation: 1, At: at.UTC(), Peers: set.Keys(), Bootstrap: "join", Former: "db-0.db.ns.svc.cluster.local"}
	if d.Delivered == nil || d.Delivered.At != want.At || d.Delivered.Generation != 1 || d.Delivered.Bootstrap != "join" ||
		d.Delivered.Former != want.Former || len(d.Delivered.Peers) != 2 {
		t.Errorf("Delivered = %+v, want %+v", d.Delivered, want)
	}
	if d.Version != DocumentVersion || !d.Ready || d.Generation != 2 || d.HeldBy.Gate != "too-few-peers" ||
		!reflect.DeepEqual(d.Verdict, Verdict{Reason: "too-few-peers", Detail: "2 of 3 peers visible", Peers: 2, Need: 3}) ||
		d.Sinks[0] != (Sink{Name: "on-change", State: "failing", HoldsBack: true, Error: "exit status 1"}) || d.Warnings[0] != "hosts-file: another writer" {
		t.Errorf("document %+v", d)
	}
	if d := Build("a", engine.Status{}, nil); d.Delivered != nil || d.Sinks == nil {
		t.Errorf("before any delivery: Delivered %+v, Sinks %#v; want none and an empty list", d.Delivered, d.Sinks)
	}
}
