package bootstrap

import (
	"slices"
	"strings"
	"testing"
)

func TestParseRank(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want int64
		bad  bool
	}{
		{out: "42\n", want: 42},
		{out: "  7 ", want: 7},
		{out: "", want: NoData},
		{out: "\n", want: NoData},
		{out: "-1", want: NoData},
		{out: "0", want: 0},
		{out: "-2", bad: true},
		{out: "12abc", bad: true},
		{out: "1.5", bad: true},
		{out: "1\n2", bad: true},
	} {
		got, err := ParseRank(tc.out)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("ParseRank(%q) = %d, %v; want %d, error %v", tc.out, got, err, tc.want, tc.bad)
		}
	}
}

// cold is a cold start of db-0..db-2 after a shutdown: the record names
// db-0 of an earlier pod (uid old-0), every pod is new and not Ready.
func cold() RankInput {
	return RankInput{
		Expected: []string{"db-0", "db-1", "db-2"},
		Pods:     map[string]PodState{"db-0": {UID: "u0"}, "db-1": {UID: "u1"}, "db-2": {UID: "u2"}},
		Ranks:    map[string]Rank{},
		Record:   &Record{Pod: "db-0", UID: "old-0", Member: fqdn("db-0")},
	}
}

// again is db-0, the recorded former, asking for its role again in the
// same pod (u0) after it formed and db-1 (pod state db1) was told to join:
// a restart of its container or of its node.
func again(db1 PodState) RankInput {
	return RankInput{
		Self:       "db-0",
		Expected:   []string{"db-0", "db-1", "db-2"},
		Pods:       map[string]PodState{"db-0": {UID: "u0"}, "db-1": db1},
		Ranks:      map[string]Rank{"db-0": {UID: "u0", Value: NoData, Role: Form}, "db-1": {UID: db1.UID, Value: NoData, Role: Join}},
		Record:     &Record{Pod: "db-0", UID: "u0", Member: fqdn("db-0"), Members: []Member{{Pod: "db-0", UID: "u0"}, {Pod: "db-1", UID: "u1"}}},
		FormerData: true,
	}
}

// withdrawn is in after Self asked again: its mark withdrawn, its rank
// (value) written in the record's epoch.
func withdrawn(in RankInput, value int64) RankInput {
	in.Ranks[in.Self] = Rank{UID: in.Pods[in.Self].UID, Value: value, Epoch: in.Record.Epoch}
	return in
}

func withRanks(in RankInput, self string, ranks map[string]Rank) RankInput {
	in.Self = self
	for name, r := range ranks {
		if r.UID == "" {
			r.UID = in.Pods[name].UID
		}
		in.Ranks[name] = r
	}
	return in
}

func TestDecideRank(t *testing.T) {
	all := map[string]Rank{"db-0": {Value: 10}, "db-1": {Value: 12}, "db-2": {Value: 11}}
	tests := []struct {
		name       string
		in         RankInput
		wantReason RankReason
		wantRole   Role
		wantFormer string
		selfRank   bool
		awaited    []string
		failed     []string
		never      []string
		joined     []string
		marked     []string
	}{
		{name: "highest rank forms, not the first ordinal",
			in:         withRanks(cold(), "db-1", all),
			wantReason: HighestRank, wantRole: Form, wantFormer: "db-1"},
		{name: "the first ordinal joins the highest rank",
			in:         withRanks(cold(), "db-0", all),
			wantReason: LowerRank, wantRole: Join, wantFormer: "db-1"},
		{name: "ties go to the lowest ordinal",
			in:         withRanks(cold(), "db-2", map[string]Rank{"db-0": {Value: 5}, "db-1": {Value: 9}, "db-2": {Value: 9}}),
			wantReason: LowerRank, wantRole: Join, wantFormer: "db-1"},
		{name: "no member has data: the lowest ordinal forms",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: NoData}, "db-1": {Value: NoData}, "db-2": {Value: NoData}}),
			wantReason: HighestRank, wantRole: Form, wantFormer: "db-0"},
		{name: "a missing rank waits",
			in:         withRanks(cold(), "db-1", map[string]Rank{"db-0": {Value: 10}, "db-1": {Value: 12}}),
			wantReason: RankAwaited, awaited: []string{"db-2"}},
		{name: "a rank of the earlier pod of that name does not count",
			in:         withRanks(cold(), "db-1", map[string]Rank{"db-0": {Value: 10}, "db-1": {Value: 12}, "db-2": {UID: "old-2", Value: 99}}),
			wantReason: RankAwaited, awaited: []string{"db-2"}},
		{name: "a member whose pod does not exist is awaited",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", all)
				delete(in.Pods, "db-2")
				return in
			}(),
			wantReason: RankAwaited, awaited: []string{"db-2"}},
		{name: "a failed rank command counts as missing",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 10}, "db-1": {Err: "exit status 2: grastate.dat: permission denied"}, "db-2": {Value: 11}}),
			wantReason: RankAwaited, awaited: []string{"db-1"}, failed: []string{"db-1"}},
		{name: "a quorum decides without the missing member",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 10}, "db-1": {Err: "exit status 1"}, "db-2": {Value: 11}})
				in.Quorum = 2
				return in
			}(),
			wantReason: LowerRank, wantRole: Join, wantFormer: "db-2", awaited: []string{"db-1"}, failed: []string{"db-1"}},
		{name: "below the quorum waits",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 10}})
				in.Quorum = 2
				return in
			}(),
			wantReason: RankAwaited, awaited: []string{"db-1", "db-2"}},
		{name: "without its own rank a member runs its command first",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-1": {Value: 12}, "db-2": {Value: 11}}),
			wantReason: RankAwaited, selfRank: true},
		{name: "its own failed command is run again",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-0": {Err: "exit status 1"}, "db-1": {Value: 12}, "db-2": {Value: 11}}),
			wantReason: RankAwaited, selfRank: true},
		{name: "a Ready member runs: join it",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", all)
				in.Pods["db-2"] = PodState{UID: "u2", Ready: true}
				return in
			}(),
			wantReason: MemberRunning, wantRole: Join, wantFormer: "db-2"},
		{name: "a member told its role, not Ready, is awaited until it asks again",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 1}, "db-1": {Value: 3, Role: Join}, "db-2": {Value: 2}}),
			wantReason: RankAwaited, awaited: []string{"db-1"}, marked: []string{"db-1"}},
		{name: "a member that asked again: its withdrawn mark is a rank",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 1}, "db-1": {Value: 3}, "db-2": {Value: 2}}),
			wantReason: LowerRank, wantRole: Join, wantFormer: "db-1"},
		{name: "a role mark of an earlier pod is not running",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 1}, "db-1": {UID: "old-1", Value: 3, Role: Form}, "db-2": {Value: 2}}),
			wantReason: RankAwaited, awaited: []string{"db-1"}},
		{name: "a member that appears after the decision: the record decides (join)",
			in: func() RankInput {
				in := withRanks(cold(), "db-3", all)
				in.Record = &Record{Pod: "db-1", UID: "u1", Member: fqdn("db-1"), Epoch: 1}
				in.Pods["db-3"] = PodState{UID: "u3"}
				return in
			}(),
			wantReason: RankNotApplicable},
		{name: "members that never ran are not awaited (a scale-up during the first bootstrap)",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 1}})
				in.Expected = append(in.Expected, "db-3", "db-4")
				in.Record.Members = []Member{{Pod: "db-0", UID: "old-0"}}
				delete(in.Pods, "db-1")
				delete(in.Pods, "db-2")
				return in
			}(),
			wantReason: HighestRank, wantRole: Form, wantFormer: "db-0", never: []string{"db-1", "db-2", "db-3", "db-4"}},
		{name: "a member that ran is awaited, one that never ran is not",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 1}})
				in.Record.Members = []Member{{Pod: "db-0", UID: "old-0"}, {Pod: "db-1", UID: "old-1"}}
				delete(in.Pods, "db-1")
				delete(in.Pods, "db-2")
				return in
			}(),
			wantReason: RankAwaited, awaited: []string{"db-1"}, never: []string{"db-2"}},
		{name: "a running mark of an earlier pod counts as ran",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 1}, "db-2": {UID: "old-2", Value: 4, Role: Join}})
				in.Record.Members = []Member{{Pod: "db-0", UID: "old-0"}}
				return in
			}(),
			wantReason: RankAwaited, awaited: []string{"db-2"}, never: []string{"db-1"}},
		{name: "a rank reported by a member that never ran still competes",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 1}, "db-1": {Value: 7}})
				in.Record.Members = []Member{{Pod: "db-0", UID: "old-0"}}
				delete(in.Pods, "db-2")
				return in
			}(),
			wantReason: LowerRank, wantRole: Join, wantFormer: "db-1", never: []string{"db-2"}},
		{name: "the former killed while the others joined it: the pod with its data forms again",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 5}, "db-1": {Value: NoData, Role: Join}, "db-2": {Value: NoData, Role: Join}})
				in.FormerData = true
				return in
			}(),
			wantReason: HighestRank, wantRole: Form, wantFormer: "db-0", joined: []string{"db-1", "db-2"}},
		{name: "a member told join that is Ready runs, even beside the former's data",
			in: func() RankInput {
				in := withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 5}, "db-1": {Value: NoData, Role: Join}, "db-2": {Value: NoData, Role: Join}})
				in.FormerData = true
				in.Pods["db-2"] = PodState{UID: "u2", Ready: true}
				return in
			}(),
			wantReason: MemberRunning, wantRole: Join, wantFormer: "db-2"},
		{name: "without the former's data a member told join is awaited",
			in:         withRanks(cold(), "db-0", map[string]Rank{"db-0": {Value: 5}, "db-1": {Value: NoData, Role: Join}}),
			wantReason: RankAwaited, awaited: []string{"db-1", "db-2"}, marked: []string{"db-1"}},
		{name: "the former's pod asks again: it withdraws its mark first",
			in:         again(PodState{UID: "u1"}),
			wantReason: RankAwaited, selfRank: true},
		{name: "the former asked again, a joiner never Ready since: it forms again (galera-3's stuck round)",
			in:         withdrawn(again(PodState{UID: "u1"}), 5),
			wantReason: HighestRank, wantRole: Form, wantFormer: "db-0", joined: []string{"db-1"}, never: []string{"db-2"}},
		{name: "the former asked again, a joiner that was Ready since is awaited (galera-4's stuck round 35)",
			in:         withdrawn(again(PodState{UID: "u1", WasReady: true}), 5),
			wantReason: RankAwaited, awaited: []string{"db-1"}, marked: []string{"db-1"}, never: []string{"db-2"}},
		{name: "the former and the joiner both asked again: the higher rank forms",
			in: func() RankInput {
				in := withdrawn(again(PodState{UID: "u1", WasReady: true}), 5)
				in.Ranks["db-1"] = Rank{UID: "u1", Value: 6}
				return in
			}(),
			wantReason: LowerRank, wantRole: Join, wantFormer: "db-1", never: []string{"db-2"}},
		{name: "a joiner asks again after the former did: it withdraws too",
			in: func() RankInput {
				in := withdrawn(again(PodState{UID: "u1", WasReady: true}), 5)
				in.Self, in.FormerData = "db-1", false
				return in
			}(),
			wantReason: RankAwaited, selfRank: true},
		{name: "a former named by a rank decision stands until it asks again",
			in: func() RankInput {
				in := withRanks(cold(), "db-2", map[string]Rank{"db-0": {Value: 20}, "db-1": {Value: 12}, "db-2": {Value: 11}})
				in.Record = &Record{Pod: "db-1", UID: "u1", Epoch: 1}
				return in
			}(),
			wantReason: RankNotApplicable},
		{name: "the former withdrew after the decision: the ranks decide again",
			in: func() RankInput {
				in := withRanks(cold(), "db-2", map[string]Rank{"db-0": {Value: 20}, "db-1": {Value: 12, Epoch: 1}, "db-2": {Value: 11}})
				in.Record = &Record{Pod: "db-1", UID: "u1", Epoch: 1}
				return in
			}(),
			wantReason: LowerRank, wantRole: Join, wantFormer: "db-0"},
		{name: "the former's pod asks again, a Ready member runs: join it",
			in:         again(PodState{UID: "u1", Ready: true, WasReady: true}),
			wantReason: MemberRunning, wantRole: Join, wantFormer: "db-1"},
		{name: "the former's process that told its role keeps it: the record decides",
			in: func() RankInput {
				in := again(PodState{UID: "u1", Ready: true, WasReady: true})
				in.Told = true
				return in
			}(),
			wantReason: RankNotApplicable},
		{name: "the former's pod without a running mark (its first decision): the record decides",
			in: func() RankInput {
				in := again(PodState{UID: "u1", Ready: true, WasReady: true})
				delete(in.Ranks, "db-0")
				return in
			}(),
			wantReason: RankNotApplicable},
		{name: "another member's pod asks again while the former is Ready: the record decides",
			in: func() RankInput {
				in := again(PodState{UID: "u1"})
				in.Self, in.FormerData = "db-1", false
				in.Pods["db-0"] = PodState{UID: "u0", Ready: true, WasReady: true}
				return in
			}(),
			wantReason: RankNotApplicable},
		{name: "another member's pod asks again while the former is not Ready: it withdraws",
			in: func() RankInput {
				in := again(PodState{UID: "u1"})
				in.Self, in.FormerData = "db-1", false
				return in
			}(),
			wantReason: RankAwaited, selfRank: true},
		{name: "another member asked again while the former is not Ready: it awaits the former's rank",
			in: func() RankInput {
				in := again(PodState{UID: "u1"})
				in.Self, in.FormerData = "db-1", false
				return withdrawn(in, 4)
			}(),
			wantReason: RankAwaited, awaited: []string{"db-0"}, marked: []string{"db-0"}, never: []string{"db-2"}},
		{name: "another member asked again, the former is Ready again: the record decides",
			in: func() RankInput {
				in := again(PodState{UID: "u1"})
				in.Self, in.FormerData = "db-1", false
				in.Pods["db-0"] = PodState{UID: "u0", Ready: true, WasReady: true}
				return withdrawn(in, 4)
			}(),
			wantReason: RankNotApplicable},
		{name: "never formed: the ordinal rule decides",
			in: func() RankInput {
				in := withRanks(cold(), "db-1", all)
				in.Record = nil
				return in
			}(),
			wantReason: RankNotApplicable},
		{name: "a record listing only joiners: the ordinal rule decides",
			in: func() RankInput {
				in := withRanks(cold(), "db-1", all)
				in.Record = &Record{Members: []Member{{Pod: "db-1", UID: "u1"}}}
				return in
			}(),
			wantReason: RankNotApplicable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideRank(tc.in)
			if d.Reason != tc.wantReason || d.Role != tc.wantRole || d.Former != tc.wantFormer || d.SelfRank != tc.selfRank {
				t.Errorf("DecideRank() = %s %q former %q selfRank %v (%s); want %s %q former %q selfRank %v",
					d.Reason, d.Role, d.Former, d.SelfRank, d.Detail, tc.wantReason, tc.wantRole, tc.wantFormer, tc.selfRank)
			}
			if !slices.Equal(d.Awaited, tc.awaited) || !slices.Equal(d.Failed, tc.failed) || !slices.Equal(d.Never, tc.never) || !slices.Equal(d.Joined, tc.joined) || !slices.Equal(d.Marked, tc.marked) {
				t.Errorf("awaited %v, failed %v, never %v, joined %v, marked %v; want %v, %v, %v, %v, %v",
					d.Awaited, d.Failed, d.Never, d.Joined, d.Marked, tc.awaited, tc.failed, tc.never, tc.joined, tc.marked)
			}
			if d.Former != "" && d.FormerUID != tc.in.Pods[d.Former].UID {
				t.Errorf("FormerUID = %q; want %q", d.FormerUID, tc.in.Pods[d.Former].UID)
			}
			if d.Detail == "" {
				t.Error("no detail")
			}
			if len(tc.failed) > 0 && !strings.Contains(d.Detail, "rank command failed in "+tc.failed[0]) && d.Role == "" {
				t.Errorf("detail %q does not name the failed member", d.Detail)
			}
		})
	}
}

// TestDecideRankExactlyOneForms: every member, seeing the same complete
// ranks, agrees on one former; the highest rank.
func TestDecideRankExactlyOneForms(t *testing.T) {
	ranks := map[string]Rank{"db-0": {Value: 3}, "db-1": {Value: NoData}, "db-2": {Value: 8}}
	forms := 0
	for _, self := range []string{"db-0", "db-1", "db-2"} {
		d := DecideRank(withRanks(cold(), self, ranks))
		if d.Former != "db-2" {
			t.Errorf("%s: former %q; want db-2", self, d.Former)
		}
		if d.Role == Form {
			forms++
		}
	}
	if forms != 1 {
		t.Errorf("%d members told form; want 1", forms)
	}
}
