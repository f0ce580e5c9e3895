package controller

import (
	"maps"
	"slices"
	"testing"

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

func TestPlace(t *testing.T) {
	four := []NodeInfo{node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")}
	tests := []struct {
		name        string
		in          PlacementInput
		wantAssign  map[int32]string
		wantWaiting map[int32]string
		wantMoved   []int32
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
		name: "reassign to a named free node",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n4"}, wantMoved: []int32{1},
	}, {
		name: "reassign already done is a no-op",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n4"},
			Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n4"},
	}, {
		name: "reassign to a taken node: member waits, nothing moves",
		in: PlacementInput{Replicas: 2, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: "n1"}},
		wantAssign: map[int32]string{0: "n1", 1: "n3"}, wantWaiting: map[int32]string{1: WaitReassignTarget},
	}, {
		name: "bare reassign moves only a member whose node is unusable",
		in: PlacementInput{Replicas: 2, Current: map[int32]string{0: "n1", 1: "n3"},
			Nodes:    []NodeInfo{node("n1", "a"), node("n2", "a"), node("n3", "b", cordoned), node("n4", "b")},
			Reassign: map[int32]string{0: "", 1: ""}},
		wantAssign: map[int32]string{0: "n1", 1: "n2"}, wantMoved: []int32{1},
	}, {
		name: "reassign of an inactive member is ignored",
		in: PlacementInput{Replicas: 1, Nodes: four, Current: map[int32]string{0: "n1", 1: "n3"},
			Reassign: map[int32]string{1: "n4"}},
		wantAssign: map[int32]string{0: "n1", 1: "n3"},
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
			if !slices.Equal(got.Moved, tt.wantMoved) {
				t.Errorf("Moved = %v, want %v", got.Moved, tt.wantMoved)
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
