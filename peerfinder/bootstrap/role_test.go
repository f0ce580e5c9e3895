package bootstrap

import (
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/peer"
)

func member(name string, ordinal int) peer.Peer {
	return peer.Peer{FQDN: name + ".db.ns.svc.cluster.local", Name: name, Ready: true, Ordinal: ordinal}
}

func fqdn(name string) string { return name + ".db.ns.svc.cluster.local" }

func TestDecide(t *testing.T) {
	fresh := peer.NewSet(member("db-0", 0), member("db-1", 1), member("db-2", 2))
	alone := peer.NewSet(member("db-0", 0))
	tests := []struct {
		name       string
		in         Input
		want       Role
		wantReason Reason
		wantClaim  bool
	}{
		// Without a cluster record: the ordinal rule.
		{name: "first ordinal alone forms",
			in:   Input{Self: fqdn("db-0"), Set: alone},
			want: Form, wantReason: FirstOrdinal},
		{name: "first ordinal with peers forms",
			in:   Input{Self: fqdn("db-0"), Set: fresh},
			want: Form, wantReason: FirstOrdinal},
		{name: "later ordinal joins",
			in:   Input{Self: fqdn("db-2"), Set: fresh},
			want: Join, wantReason: LowerOrdinalSeen},
		{name: "lowest visible but not the first ordinal joins",
			in:   Input{Self: fqdn("db-1"), Set: peer.NewSet(member("db-1", 1), member("db-2", 2))},
			want: Join, wantReason: NotFirstOrdinal},
		{name: "custom start ordinal forms",
			in:   Input{Self: fqdn("db-5"), Set: peer.NewSet(member("db-5", 5), member("db-6", 6)), FirstOrdinal: 5},
			want: Form, wantReason: FirstOrdinal},
		{name: "peer below the start ordinal means we are not first",
			in:   Input{Self: fqdn("db-5"), Set: peer.NewSet(member("db-4", 4), member("db-5", 5)), FirstOrdinal: 5},
			want: Join, wantReason: LowerOrdinalSeen},
		{name: "unknown ordinal never forms without a record",
			in:   Input{Self: fqdn("api-7d9f"), Set: peer.NewSet(member("api-7d9f", -1), member("api-x2b1", -1))},
			want: Join, wantReason: OrdinalUnknown},
		{name: "self missing from the set is treated as unknown ordinal",
			in:   Input{Self: fqdn("db-0"), Set: peer.NewSet(member("db-1", 1))},
			want: Join, wantReason: OrdinalUnknown},
		{name: "pod-0 that lost its data forms without a record (the documented limit)",
			in:   Input{Self: fqdn("db-0"), Set: fresh, SelfPod: "db-0", SelfUID: "new"},
			want: Form, wantReason: FirstOrdinal},

		// With a cluster record.
		{name: "record empty: first ordinal claims",
			in:   Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0"},
			want: Form, wantReason: FirstOrdinal, wantClaim: true},
		{name: "record empty: later ordinal joins without claiming",
			in:   Input{Self: fqdn("db-1"), Set: fresh, UseRecord: true, SelfPod: "db-1", SelfUID: "u1"},
			want: Join, wantReason: LowerOrdinalSeen},
		{name: "record lists joiners but no former: first ordinal claims",
			in: Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0",
				Record: &Record{Members: []Member{{Pod: "db-1", UID: "u1"}}}},
			want: Form, wantReason: FirstOrdinal, wantClaim: true},
		{name: "record lists joiners but no former: later ordinal joins",
			in: Input{Self: fqdn("db-2"), Set: fresh, UseRecord: true, SelfPod: "db-2", SelfUID: "u2",
				Record: &Record{Members: []Member{{Pod: "db-1", UID: "u1"}}}},
			want: Join, wantReason: LowerOrdinalSeen},
		{name: "record names self: form again (retry or container restart)",
			in: Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0",
				Record: &Record{Pod: "db-0", UID: "u0"}},
			want: Form, wantReason: RecordedSelf},
		{name: "pod-0 re-created after data loss joins",
			in: Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0-new",
				Record: &Record{Pod: "db-0", UID: "u0"}},
			want: Join, wantReason: RecordedOther},
		{name: "pod-0 re-created alone still joins",
			in: Input{Self: fqdn("db-0"), Set: alone, UseRecord: true, SelfPod: "db-0", SelfUID: "u0-new",
				Record: &Record{Pod: "db-0", UID: "u0"}},
			want: Join, wantReason: RecordedOther},
		{name: "another member formed: join",
			in: Input{Self: fqdn("db-1"), Set: fresh, UseRecord: true, SelfPod: "db-1", SelfUID: "u1",
				Record: &Record{Pod: "db-0", UID: "u0"}},
			want: Join, wantReason: RecordedOther},
		{name: "record without uid is taken as formed",
			in: Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0",
				Record: &Record{Pod: "db-0"}},
			want: Join, wantReason: RecordUnreadable},
		{name: "own uid unknown with a record in use: join",
			in:   Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0"},
			want: Join, wantReason: SelfIdentityUnset},
		{name: "unknown ordinal with a free record: claim",
			in: Input{Self: fqdn("api-7d9f"), Set: peer.NewSet(member("api-7d9f", -1), member("api-x2b1", -1)),
				UseRecord: true, SelfPod: "api-7d9f", SelfUID: "ua"},
			want: Form, wantReason: ElectedByLease, wantClaim: true},
		{name: "unknown ordinal, record held by another: join",
			in: Input{Self: fqdn("api-7d9f"), Set: peer.NewSet(member("api-7d9f", -1)),
				UseRecord: true, SelfPod: "api-7d9f", SelfUID: "ua", Record: &Record{Pod: "api-x2b1", UID: "ub"}},
			want: Join, wantReason: RecordedOther},
		// A stale record: every recorded member's data is gone.
		{name: "stale record: first ordinal claims over it",
			in: Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "new", Stale: true,
				Record: &Record{Pod: "db-0", UID: "u0"}},
			want: Form, wantReason: FirstOrdinal, wantClaim: true},
		{name: "stale record: later ordinal gets no role until one forms",
			in: Input{Self: fqdn("db-1"), Set: fresh, UseRecord: true, SelfPod: "db-1", SelfUID: "new1", Stale: true,
				Record: &Record{Pod: "db-0", UID: "u0"}},
			want: "", wantReason: ClusterGone},
		{name: "stale record: no ordinal, elected by the Lease",
			in: Input{Self: fqdn("api-7d9f"), Set: peer.NewSet(member("api-7d9f", -1)), UseRecord: true, SelfPod: "api-7d9f", SelfUID: "ua", Stale: true,
				Record: &Record{Pod: "api-x2b1", UID: "ub"}},
			want: Form, wantReason: ElectedByLease, wantClaim: true},
		{name: "record naming self is never stale",
			in: Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0", Stale: true,
				Record: &Record{Pod: "db-0", UID: "u0"}},
			want: Form, wantReason: RecordedSelf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			if got.Role != tt.want || got.Reason != tt.wantReason || got.Claim != tt.wantClaim {
				t.Errorf("Decide() = %s/%s claim=%v (%s), want %s/%s claim=%v",
					got.Role, got.Reason, got.Claim, got.Detail, tt.want, tt.wantReason, tt.wantClaim)
			}
			if strings.TrimSpace(got.Detail) == "" {
				t.Errorf("Decide() has no detail")
			}
		})
	}
}

// TestDecideAtMostOneFormer checks the safety property over every member of
// a set: without a record, at most one member of any set is told form.
func TestDecideAtMostOneFormer(t *testing.T) {
	sets := []peer.Set{
		peer.NewSet(member("db-0", 0), member("db-1", 1), member("db-2", 2)),
		peer.NewSet(member("db-1", 1), member("db-2", 2)),
		peer.NewSet(member("db-0", 0)),
		peer.NewSet(member("a", -1), member("b", -1)),
	}
	for _, s := range sets {
		formers := 0
		for _, p := range s.Peers() {
			if Decide(Input{Self: p.Key(), Set: s}).Role == Form {
				formers++
			}
		}
		if formers > 1 {
			t.Errorf("set %v: %d members told form", s.Keys(), formers)
		}
	}
}

func TestRegister(t *testing.T) {
	c0 := Claim{Name: "data-db-0", UID: "c0"}
	c0new := Claim{Name: "data-db-0", UID: "c0-new"}
	c1 := Claim{Name: "data-db-1", UID: "c1"}
	db0 := Member{Pod: "db-0", UID: "p0", Claims: []Claim{c0}}
	db1 := Member{Pod: "db-1", UID: "p1", Claims: []Claim{c1}}
	tests := []struct {
		name        string
		rec         *Record
		me          Member
		gone        []Member
		want        []Member
		wantChanged bool
	}{
		{name: "no record", me: db1},
		{name: "record without a member list is left alone", rec: &Record{Pod: "db-0", UID: "p0"}, me: db1},
		{name: "joiner is added", rec: &Record{Members: []Member{db0}}, me: db1,
			want: []Member{db0, db1}, wantChanged: true},
		{name: "already registered: no write", rec: &Record{Members: []Member{db0, db1}}, me: db1,
			want: []Member{db0, db1}},
		{name: "re-created pod with its claim kept replaces its entry",
			rec: &Record{Members: []Member{db0, db1}}, me: Member{Pod: "db-0", UID: "p0-new", Claims: []Claim{c0}},
			want: []Member{db1, {Pod: "db-0", UID: "p0-new", Claims: []Claim{c0}}}, wantChanged: true},
		{name: "pod that lost its claim: the gone entry is dropped",
			rec: &Record{Members: []Member{db0, db1}}, me: Member{Pod: "db-0", UID: "p0-new", Claims: []Claim{c0new}}, gone: []Member{db0},
			want: []Member{db1, {Pod: "db-0", UID: "p0-new", Claims: []Claim{c0new}}}, wantChanged: true},
		{name: "same name, other claims, not known gone: kept",
			rec: &Record{Members: []Member{db0}}, me: Member{Pod: "db-0", UID: "p0-new", Claims: []Claim{c0new}},
			want: []Member{db0, {Pod: "db-0", UID: "p0-new", Claims: []Claim{c0new}}}, wantChanged: true},
		{name: "claim-less pod re-created replaces its entry",
			rec: &Record{Members: []Member{{Pod: "db-0", UID: "p0"}}}, me: Member{Pod: "db-0", UID: "p0-new"},
			want: []Member{{Pod: "db-0", UID: "p0-new"}}, wantChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := register(tt.rec, tt.me, tt.gone)
			if changed != tt.wantChanged || len(got) != len(tt.want) {
				t.Fatalf("register() = %v, %v; want %v, %v", got, changed, tt.want, tt.wantChanged)
			}
			for i := range got {
				if !equalMember(got[i], tt.want[i]) {
					t.Errorf("register()[%d] = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestDecideFormer: the member joiners target is self when told to form,
// the recorded member with a record, else the lowest visible ordinal.
func TestDecideFormer(t *testing.T) {
	fresh := peer.NewSet(member("db-0", 0), member("db-1", 1), member("db-2", 2))
	other := &Record{Pod: "db-0", UID: "u0", Member: fqdn("db-0")}
	for _, tt := range []struct {
		name string
		in   Input
		want string
	}{
		{"forms: self", Input{Self: fqdn("db-0"), Set: fresh}, fqdn("db-0")},
		{"joins by ordinal: the first ordinal", Input{Self: fqdn("db-2"), Set: fresh}, fqdn("db-0")},
		{"joins, first ordinal not visible: the lowest visible",
			Input{Self: fqdn("db-2"), Set: peer.NewSet(member("db-1", 1), member("db-2", 2))}, fqdn("db-1")},
		{"no ordinals, no record: unknown",
			Input{Self: fqdn("api-a"), Set: peer.NewSet(member("api-a", -1), member("api-b", -1))}, ""},
		{"record names another member: the recorded one",
			Input{Self: fqdn("db-1"), Set: peer.NewSet(member("db-1", 1), member("db-2", 2)), UseRecord: true, SelfPod: "db-1", SelfUID: "u1", Record: other},
			fqdn("db-0")},
		{"pod-0 re-created after data loss joins: never itself, the lowest other",
			Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0-new", Record: other}, fqdn("db-1")},
		{"record naming no member key: unknown",
			Input{Self: fqdn("db-1"), Set: fresh, UseRecord: true, SelfPod: "db-1", SelfUID: "u1", Record: &Record{Pod: "db-0", UID: "u0"}}, ""},
		{"record names self: self",
			Input{Self: fqdn("db-0"), Set: fresh, UseRecord: true, SelfPod: "db-0", SelfUID: "u0", Record: other}, fqdn("db-0")},
		{"stale record, no role yet: unknown",
			Input{Self: fqdn("db-2"), Set: fresh, UseRecord: true, SelfPod: "db-2", SelfUID: "u2", Record: &Record{Pod: "db-0", UID: "u0", Member: fqdn("db-0"), Members: []Member{{Pod: "db-0", UID: "u0"}}}, Stale: true}, ""},
	} {
		if got := Decide(tt.in).Former; got != tt.want {
			t.Errorf("%s: Former = %q, want %q", tt.name, got, tt.want)
		}
	}
}
