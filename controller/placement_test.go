package controller

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func node(name, zone string, mods ...func(*NodeInfo)) NodeInfo {
	n := NodeInfo{Name: name, Labels: map[string]string{hostnameLabel: name, zoneLabel: zone, "pool": "db"}}
	for _, m := range mods {
		m(&n)
	}
	return n
}

func cordoned(n *NodeInfo) { n.Unschedulable = true }

func tainted(n *NodeInfo) {
	n.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
}

func otherPool(n *NodeInfo) { n.Labels["pool"] = "web" }

func notReady(n *NodeInfo) { n.NotReady = true }

func TestPlace(t *testing.T) {
	four := []NodeInfo{node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")}
	tests := []struct {
		name        string
		in          PlacementInput
		wantAssign  map[int32]string
		wantWaiting map[int32]string
		wantStarted map[int32]string
		wantRefused []int32
		wantQueued  map[int32]string
	}{{
		name:       "fresh: spread over zones, then by name",
		in:         PlacementInput{Replicas: 3, Nodes: four},
		wantAssign: map[int32]string{0: "n1", 1: "n3", 2: "n2"},
	}, {
		name:       "existing assignments are kept, new member gets a free node",
		in:         PlacementInput{Replicas: 3, Nodes: four, Current: map[int32]string{0: "n4", 1: "n2"}},
		wantAssign: map[int32]string{0: "n4", 1: "n2", 2: "n1"},
	}, {
		name:        "node gone: member keeps it and waits",
		in:          PlacementInput{Replicas: 2, Nodes: four[1:], Current: map[int32]string{0: "n1", 1: "n3"}},
		wantAssign:  map[int32]string{0: "n1", 1: "n3"},
		wantWaiting: map[int32]string{0: WaitNodeGone},
	}, {
		name: "node cordoned: member keeps it and waits",
		in: PlacementInput{Replicas: 2, Current: map[int32]string{0: "n1", 1: "n3"},
			Nodes: []NodeInfo{node("n1", "a", cordoned), node("n2", "a"), node("n3", "b")}},
		wantAssign:  map[int32]string{0: "n1", 1: "n3"},
		wantWaiting: map[int32]string{0: WaitNodeUnschedulable},
	}, {
		name: "node not Ready: member keeps it and waits, and no new member goes there",
		in: PlacementInput{Replicas: 3, Current: map[int32]string{0: "n1", 1: "n3"},
			Nodes: []NodeInfo{node("n1", "a", notReady), node("n2", "a", notReady), node("n3", "b"), node("n4", "b")}},
		wantAssign:  map[int32]string{0: "n1", 1: "n3", 2: "n4"},
		wantWaiting: map[int32]string{0: WaitNodeNotReady},
	}, {
		name: "bare reassign of a member whose node is not Ready moves it to a free Ready node",
		in: PlacementInput{Replicas: 2, Current: map[int32]string{0: "n1", 1: "n3"}, Reassign: map[int32]string{0: ""},
			Nodes: []NodeInfo{node("n1", "a", notReady), node("n2", "a", notReady), node("n3", "b"), node("n4", "b")}},
		wantAssign:  map[int32]string{0: "n4", 1: "n3"},
		wantStarted: map[int32]string{0: "n1"},
	}, {
		name: "node lost its selector label or got an untolerated taint: member keeps it and waits",
		in: PlacementInput{Replicas: 2, Selector: map[string]string{"pool": "db"}, Current: map[int32]string{0: "n1", 1: "n2"},
			Nodes: []NodeInfo{node("n1", "a", otherPool), node("n2", "a", tainted), node("n3", "b")}},
		wantAssign:  map[int32]string{0: "n1", 1: "n2"},
		wantWaiting: map[int32]string{0: WaitNodeNotSelected, 1: WaitNodeTainted},
	}, {
		name:       "cordoned, tainted and unselected nodes are not eligible",
		in:         PlacementInput{Replicas: 2, Selector: map[string]string{"pool": "db"}, Nodes: []NodeInfo{node("n1", "a", cordoned), node("n2", "a", tainted), node("n3", "b", otherPool), node("n4", "b")}},
		wantAssign: map[int32]string{0: "n4"}, wantWaiting: map[int32]string{1: WaitNoEligibleNode},
	}, {
		name: "tolerated taint is eligible",
		in: PlacementInput{Replicas: 1, Nodes: []NodeInfo{node("n1", "a", tainted)},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}},
		wantAssign: map[int32]string{0: "n1"},
	}, {
		name:        "more members than nodes: the rest wait",
		in:          PlacementInput{Replicas: 5, Nodes: four},
		wantAssign:  map[int32]string{0: "n1", 1: "n3", 2: "n2", 3: "n4"},
		wantWaiting: map[int32]string{4: WaitNoEligibleNode},
	}, {
		name:       "scaled down: inactive members keep their node, which stays taken",
		in:         PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3", 2: "n2", 3: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n3", 2: "n2", 3: "n4"},
	}, {
		name:       "scale up again: member 3 returns to its node",
		in:         PlacementInput{Replicas: 4, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3", 2: "n2", 3: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n3", 2: "n2", 3: "n4"},
	}, {
		name: "reassign to a named free node starts the move",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n4"}, wantStarted: map[int32]string{1: "n3"},
	}, {
		name: "reassign already done is consumed without a move",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n4"},
			Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n4"},
	}, {
		name: "reassign to a taken node is refused, nothing moves",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: "n1"}},
		wantAssign: map[int32]string{0: "n1", 1: "n3"}, wantRefused: []int32{1},
	}, {
		name: "reassign to an ineligible node is refused, never left pending",
		in: PlacementInput{Replicas: 2, Current: map[int32]string{0: "n1", 1: "n3"},
			Nodes:    []NodeInfo{node("n1", "a"), node("n2", "a", cordoned), node("n3", "b")},
			Reassign: map[int32]string{1: "n2"}},
		wantAssign: map[int32]string{0: "n1", 1: "n3"}, wantRefused: []int32{1},
	}, {
		name: "bare reassign moves only a member whose node is unusable now; the other entry is refused",
		in: PlacementInput{Replicas: 2, Current: map[int32]string{0: "n1", 1: "n3"},
			Nodes:    []NodeInfo{node("n1", "a"), node("n2", "a"), node("n3", "b", cordoned), node("n4", "b")},
			Reassign: map[int32]string{0: "", 1: ""}},
		wantAssign: map[int32]string{0: "n1", 1: "n2"}, wantStarted: map[int32]string{1: "n3"}, wantRefused: []int32{0},
	}, {
		name: "bare reassign of a healthy member is refused (a later cordon is no move)",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: ""}},
		wantAssign: map[int32]string{0: "n1", 1: "n3"}, wantRefused: []int32{1},
	}, {
		name: "bare reassign to a gone node with no free node is refused",
		in: PlacementInput{Replicas: 2, Nodes: []NodeInfo{node("n1", "a")}, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: ""}},
		wantAssign: map[int32]string{0: "n1", 1: "n3"}, wantWaiting: map[int32]string{1: WaitNodeGone}, wantRefused: []int32{1},
	}, {
		name: "bare reassign never picks a node with older data of the member",
		in: PlacementInput{Replicas: 2, Nodes: []NodeInfo{node("n1", "a"), node("n3", "b"), node("n4", "b")}, Current: map[int32]string{0: "n1", 1: "n2"},
			Reassign: map[int32]string{1: ""}, DataOn: map[int32][]string{1: {"n2", "n3"}}},
		wantAssign: map[int32]string{0: "n1", 1: "n4"}, wantStarted: map[int32]string{1: "n2"},
	}, {
		name: "bare reassign with only nodes holding older data is refused",
		in: PlacementInput{Replicas: 2, Nodes: []NodeInfo{node("n1", "a"), node("n3", "b")}, Current: map[int32]string{0: "n1", 1: "n2"},
			Reassign: map[int32]string{1: ""}, DataOn: map[int32][]string{1: {"n2", "n3"}}},
		wantAssign: map[int32]string{0: "n1", 1: "n2"}, wantWaiting: map[int32]string{1: WaitNodeGone}, wantRefused: []int32{1},
	}, {
		name: "reassign of an inactive member is refused, not kept for a later scale-up",
		in: PlacementInput{Replicas: 1, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n3"}, wantRefused: []int32{1},
	}, {
		name: "two moves: one at a time, the second queued",
		in: PlacementInput{Replicas: 2, Nodes: []NodeInfo{node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b"), node("n5", "b")},
			Current: map[int32]string{0: "n1", 1: "n3"}, Reassign: map[int32]string{0: "n2", 1: "n4"}},
		wantAssign: map[int32]string{0: "n2", 1: "n3"}, wantStarted: map[int32]string{0: "n1"}, wantQueued: map[int32]string{1: "n4"},
	}, {
		name: "a move under way queues every new one",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n2", 1: "n3"},
			Moving: map[int32]string{0: "n1"}, Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n2", 1: "n3"}, wantQueued: map[int32]string{1: "n4"},
	}, {
		name: "an inactive member's stale move does not block",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3", 2: "n2"},
			Moving: map[int32]string{2: "n9"}, Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n4", 2: "n2"}, wantStarted: map[int32]string{1: "n3"},
	}, {
		name: "parallel: all moves start at once",
		in: PlacementInput{Replicas: 2, Nodes: []NodeInfo{node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")},
			Current: map[int32]string{0: "n1", 1: "n3"}, Reassign: map[int32]string{0: "n2", 1: "n4"}, Parallel: true},
		wantAssign: map[int32]string{0: "n2", 1: "n4"}, wantStarted: map[int32]string{0: "n1", 1: "n3"},
	}, {
		name: "second entry targets the node the first one takes: refused",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{0: "n4", 1: "n4"}, Parallel: true},
		wantAssign: map[int32]string{0: "n4", 1: "n3"}, wantStarted: map[int32]string{0: "n1"}, wantRefused: []int32{1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.in.Current)
			got := Place(tt.in)
			if !maps.Equal(got.Assign, tt.wantAssign) {
				t.Errorf("Assign = %v, want %v", got.Assign, tt.wantAssign)
			}
			if len(got.Waiting) > 0 || len(tt.wantWaiting) > 0 {
				if !maps.Equal(got.Waiting, tt.wantWaiting) {
					t.Errorf("Waiting = %v, want %v", got.Waiting, tt.wantWaiting)
				}
			}
			if len(got.Started)+len(tt.wantStarted) > 0 && !maps.Equal(got.Started, tt.wantStarted) {
				t.Errorf("Started = %v, want %v", got.Started, tt.wantStarted)
			}
			if refused := sortedKeys(got.Refused); !slices.Equal(refused, tt.wantRefused) {
				t.Errorf("Refused = %v, want entries %v", got.Refused, tt.wantRefused)
			}
			if len(got.Queued)+len(tt.wantQueued) > 0 && !maps.Equal(got.Queued, tt.wantQueued) {
				t.Errorf("Queued = %v, want %v", got.Queued, tt.wantQueued)
			}
			if !maps.Equal(tt.in.Current, before) {
				t.Errorf("Place changed its input: %v, was %v", tt.in.Current, before)
			}
		})
	}
}

func TestPlaceIsDeterministic(t *testing.T) {
	in := PlacementInput{Replicas: 4, Nodes: []NodeInfo{node("n4", "b"), node("n2", "a"), node("n3", "b"), node("n1", "a")}}
	first := Place(in)
	for range 20 {
		if got := Place(in); !maps.Equal(got.Assign, first.Assign) {
			t.Fatalf("Place gave %v, then %v", first.Assign, got.Assign)
		}
	}
}

func TestFormatReassign(t *testing.T) {
	for _, in := range []string{"", "1", "0=n1", "0,2=n2,10=n3"} {
		m, err := ParseReassign(in)
		if err != nil {
			t.Fatalf("ParseReassign(%q): %v", in, err)
		}
		if got := FormatReassign(m); got != in {
			t.Errorf("FormatReassign(ParseReassign(%q)) = %q", in, got)
		}
	}
}

func TestParseReassign(t *testing.T) {
	tests := []struct {
		in      string
		want    map[int32]string
		wantErr bool
	}{
		{in: "", want: map[int32]string{}},
		{in: "1=node-a", want: map[int32]string{1: "node-a"}},
		{in: " 0 , 2 = n2 ,", want: map[int32]string{0: "", 2: "n2"}},
		{in: "x=n1", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "1=a,1=b", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseReassign(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseReassign(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !maps.Equal(got, tt.want) {
			t.Errorf("ParseReassign(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestPlaceNodeLoss(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rule := &NodeLossRule{After: 10 * time.Minute, Quorum: 2}
	long := map[int32]time.Time{1: now.Add(-11 * time.Minute)}
	// n2 lost (not Ready), n4 free; members 0 and 2 Ready.
	nodes := []NodeInfo{node("n1", "a"), node("n2", "b", notReady), node("n3", "c"), node("n4", "b")}
	cur := map[int32]string{0: "n1", 1: "n2", 2: "n3"}
	ready02 := map[int32]bool{0: true, 2: true}
	base := func(mod func(*PlacementInput)) PlacementInput {
		in := PlacementInput{Replicas: 3, Nodes: nodes, Current: cur, NodeLoss: rule, Now: now, LostSince: long, Ready: ready02}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	tests := []struct {
		name        string
		in          PlacementInput
		wantStarted map[int32]string
		wantHeld    string // substring of Held[1]; "" when it moves
		wantRecheck time.Duration
	}{{
		name:        "lost longer than After, the others Ready: moves to the free node",
		in:          base(nil),
		wantStarted: map[int32]string{1: "n2"},
	}, {
		name:     "policy Wait: never moves",
		in:       base(func(in *PlacementInput) { in.NodeLoss = nil }),
		wantHeld: "-",
	}, {
		name: "a node gone counts as lost",
		in: base(func(in *PlacementInput) {
			in.Nodes = []NodeInfo{node("n1", "a"), node("n3", "c"), node("n4", "b")}
		}),
		wantStarted: map[int32]string{1: "n2"},
	}, {
		name:        "lost for less than After: held, recheck when it runs out",
		in:          base(func(in *PlacementInput) { in.LostSince = map[int32]time.Time{1: now.Add(-4 * time.Minute)} }),
		wantHeld:    "in 6m0s",
		wantRecheck: 6 * time.Minute,
	}, {
		name:        "first seen lost now: held for all of After",
		in:          base(func(in *PlacementInput) { in.LostSince = nil }),
		wantHeld:    "in 10m0s",
		wantRecheck: 10 * time.Minute,
	}, {
		name:     "another member not Ready: held",
		in:       base(func(in *PlacementInput) { in.Ready = map[int32]bool{0: true} }),
		wantHeld: "member 2 is not Ready",
	}, {
		name: "two nodes lost: nothing moves",
		in: base(func(in *PlacementInput) {
			in.Nodes = []NodeInfo{node("n1", "a"), node("n2", "b", notReady), node("n3", "c", notReady), node("n4", "b"), node("n5", "c")}
			in.Ready = map[int32]bool{0: true}
			in.LostSince = map[int32]time.Time{1: now.Add(-time.Hour), 2: now.Add(-time.Hour)}
		}),
		wantHeld: "member 2 is not Ready",
	}, {
		name:     "below the quorum: held",
		in:       base(func(in *PlacementInput) { in.NodeLoss = &NodeLossRule{After: time.Minute, Quorum: 3} }),
		wantHeld: "below the quorum of 3",
	}, {
		name:     "a move under way: held",
		in:       base(func(in *PlacementInput) { in.Moving = map[int32]string{0: "n9"} }),
		wantHeld: "another member is moving",
	}, {
		name: "an explicit move started now: held",
		in: base(func(in *PlacementInput) {
			in.Nodes = append(slices.Clone(nodes), node("n5", "a"))
			in.Reassign = map[int32]string{0: "n5"}
		}),
		wantStarted: map[int32]string{0: "n1"},
		wantHeld:    "another member is moving",
	}, {
		name:     "no free eligible node: held",
		in:       base(func(in *PlacementInput) { in.Nodes = nodes[:3] }),
		wantHeld: "no free eligible node",
	}, {
		name:     "the free node holds older data of the member: held",
		in:       base(func(in *PlacementInput) { in.DataOn = map[int32][]string{1: {"n2", "n4"}} }),
		wantHeld: "no free eligible node without older data",
	}, {
		name: "older data of another member does not matter",
		in: base(func(in *PlacementInput) {
			in.DataOn = map[int32][]string{0: {"n1", "n4"}, 1: {"n2"}}
		}),
		wantStarted: map[int32]string{1: "n2"},
	}, {
		name:     "the free node is cordoned: held",
		in:       base(func(in *PlacementInput) { in.Nodes = append(slices.Clone(nodes[:3]), node("n4", "b", cordoned)) }),
		wantHeld: "no free eligible node",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Place(tt.in)
			if len(got.Started)+len(tt.wantStarted) > 0 && !maps.Equal(got.Started, tt.wantStarted) {
				t.Errorf("Started = %v, want %v", got.Started, tt.wantStarted)
			}
			held := got.Held[1]
			switch {
			case tt.wantHeld == "" && held != "":
				t.Errorf("Held[1] = %q, want a move", held)
			case tt.wantHeld == "-" && held != "":
				t.Errorf("Held[1] = %q under policy Wait", held)
			case tt.wantHeld != "" && tt.wantHeld != "-" && !strings.Contains(held, tt.wantHeld):
				t.Errorf("Held[1] = %q, want it to say %q", held, tt.wantHeld)
			}
			if got.Recheck != tt.wantRecheck {
				t.Errorf("Recheck = %v, want %v", got.Recheck, tt.wantRecheck)
			}
			_, moved := got.Started[1]
			if _, byRule := got.NodeLost[1]; moved != (tt.wantHeld == "") || byRule != moved {
				t.Errorf("member 1 moved %v (by the rule: %v), want %v", moved, byRule, tt.wantHeld == "")
			}
			if moved {
				if got.Assign[1] != "n4" || got.Waiting[1] != "" {
					t.Errorf("member 1 assigned %q waiting %q, want n4 and not waiting", got.Assign[1], got.Waiting[1])
				}
				if d := got.NodeLost[1]; d != now.Sub(tt.in.LostSince[1]) {
					t.Errorf("NodeLost[1] = %v, want %v", d, now.Sub(tt.in.LostSince[1]))
				}
			} else if !lostNode(got.Waiting[1]) {
				t.Errorf("member 1 waits %q, want a lost-node reason", got.Waiting[1])
			}
		})
	}
}
