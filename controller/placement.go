package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// zoneLabel is the well-known label placement spreads members across.
const zoneLabel = "topology.kubernetes.io/zone"

// NodeInfo is what placement needs to know about a node.
type NodeInfo struct {
	Name          string
	Labels        map[string]string
	Taints        []corev1.Taint
	Unschedulable bool
	// NotReady is true when the node's Ready condition is False or Unknown
	// (its kubelet stopped reporting: a partition, a crash, a power loss).
	NotReady bool
}

// NodeInfoFrom slims a Node down to what placement reads.
func NodeInfoFrom(n *corev1.Node) NodeInfo {
	return NodeInfo{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable, NotReady: nodeNotReady(n)}
}

// nodeNotReady reports whether n's Ready condition is present and not True
// (a node that has not reported yet has none).
func nodeNotReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return false
}

// PlacementInput is everything placement decides from.
type PlacementInput struct {
	// Replicas is the number of active members (ordinals 0..Replicas-1).
	Replicas int32
	// Current are the recorded assignments, ordinal -> node, of active and
	// inactive members (from existing volumes and status).
	Current map[int32]string
	// Nodes are all nodes of the cluster.
	Nodes []NodeInfo
	// Selector and Tolerations define the eligible nodes.
	Selector    map[string]string
	Tolerations []corev1.Toleration
	// Reassign are the entries of the reassign annotation (see ParseReassign).
	Reassign map[int32]string
	// Moving are the members whose move is under way (status.members[].movingFrom
	// of active members), ordinal -> node left.
	Moving map[int32]string
	// Parallel starts every valid Reassign entry at once instead of one at a time.
	Parallel bool
	// NodeLoss is the rule that moves members whose node is lost; nil
	// (policy Wait) never moves a member by itself.
	NodeLoss *NodeLossRule
	// Now is when the decision is made (NodeLoss only).
	Now time.Time
	// LostSince maps members that were already waiting for a lost node to
	// when they started waiting (status.members[].waitingSince).
	LostSince map[int32]time.Time
	// Ready are the active members whose pod is Ready on their node.
	Ready map[int32]bool
	// DataOn maps members to the nodes that hold a volume of theirs
	// (their current node, and nodes they left).
	DataOn map[int32][]string
}

// NodeLossRule is spec.nodeLoss with policy Reassign, defaults applied.
type NodeLossRule struct {
	// After is how long a member waits for its lost node before it moves.
	After time.Duration
	// Quorum is how many other members must be Ready for a move to start.
	Quorum int32
}

// Placement is the result of Place.
type Placement struct {
	// Assign maps every member that has a node (active or not) to it.
	Assign map[int32]string
	// Waiting maps active members that cannot run now to the reason.
	Waiting map[int32]string
	// Started are the moves Reassign started now: ordinal -> node left.
	Started map[int32]string
	// Refused are the Reassign entries refused now, with the reason.
	Refused map[int32]string
	// Queued are the Reassign entries left for later because a move is
	// under way; every other entry is consumed.
	Queued map[int32]string
	// Invalid says why the reassign annotation was refused as a whole
	// (malformed); set by the reconciler, not by Place.
	Invalid string
	// NodeLost are the moves of Started that the NodeLoss rule started:
	// ordinal -> how long the member had waited for its lost node.
	NodeLost map[int32]time.Duration
	// Held says, for each member waiting for a lost node under a NodeLoss
	// rule that did not move it now, when it will move or why it does not.
	Held map[int32]string
	// Recheck is how soon a held member's wait runs out (0: none does).
	Recheck time.Duration
}

// Waiting reasons.
const (
	WaitNodeGone          = "NodeGone"
	WaitNodeNotReady      = "NodeNotReady" // the node's kubelet stopped reporting
	WaitNodeUnschedulable = "NodeUnschedulable"
	WaitNodeNotSelected   = "NodeNotSelected" // the node lost a nodeSelector label
	WaitNodeTainted       = "NodeTainted"     // a NoSchedule/NoExecute taint is not tolerated
	WaitNoEligibleNode    = "NoEligibleNode"
	WaitVolumeReleased    = "VolumeReleased" // set by Status
	WaitNodeRelabelled    = "NodeRelabelled" // set by Status
)

// Place assigns members to nodes, one member per node. It is pure.
//
// Rules, in order:
//   - a recorded assignment is kept, even when its node is gone, not
//     Ready or unschedulable (the member then waits: its data is there);
//   - each Reassign entry is a one-time request, decided now: started,
//     refused, or (while another move is under way, unless Parallel)
//     queued. "i=node" starts if member i is active and the node is
//     eligible and holds no other member; a bare "i" starts only if member
//     i's node is gone or no longer eligible now, and a free eligible node
//     exists that holds no older data of member i (DataOn). Nothing else
//     but the NodeLoss rule ever moves a member;
//   - new active members go, lowest ordinal first, to free eligible
//     nodes, preferring the zone with the fewest members, then the node
//     name; when no node is free they wait;
//   - under a NodeLoss rule, a member that has waited for its lost node
//     (gone or not Ready) longer than After moves to a free eligible node
//     without older data of it, one member at a time: only when no move is under way or started
//     now, every other active member is Ready, and at least Quorum of
//     them are. The lowest such ordinal goes first.
func Place(in PlacementInput) Placement {
	byName := make(map[string]NodeInfo, len(in.Nodes))
	for _, n := range in.Nodes {
		byName[n.Name] = n
	}
	eligible := func(name string) bool {
		n, ok := byName[name]
		return ok && !n.NotReady && !n.Unschedulable && selects(in.Selector, n.Labels) && tolerates(in.Tolerations, n.Taints)
	}
	// A move the controller picks the node for never goes where the
	// member left older data: it would start from it (see rebindReleased).
	fresh := func(o int32) func(string) bool {
		return func(name string) bool { return eligible(name) && !slices.Contains(in.DataOn[o], name) }
	}
	p := Placement{Assign: map[int32]string{}, Waiting: map[int32]string{}, Started: map[int32]string{}, Refused: map[int32]string{}, Queued: map[int32]string{},
		NodeLost: map[int32]time.Duration{}, Held: map[int32]string{}}
	used := map[string]int32{}
	for o, node := range in.Current {
		if node == "" {
			continue
		}
		p.Assign[o] = node
		used[node] = o
	}

	// Explicit moves, lowest ordinal first so the result is deterministic.
	busy := false
	for o := range in.Moving {
		busy = busy || o < in.Replicas
	}
	for _, o := range sortedKeys(in.Reassign) {
		target, cur := in.Reassign[o], p.Assign[o]
		switch {
		case o >= in.Replicas:
			p.Refused[o] = fmt.Sprintf("member %d is not active (replicas %d)", o, in.Replicas)
			continue
		case cur == "":
			p.Refused[o] = fmt.Sprintf("member %d has no node yet", o)
			continue
		case target == cur:
			continue // done: consumed without a move
		case target == "" && eligible(cur):
			p.Refused[o] = fmt.Sprintf("member %d's node %s is eligible; name a target (%d=<node>) to move it anyway", o, cur, o)
			continue
		case target != "" && !eligible(target):
			p.Refused[o] = fmt.Sprintf("node %s is not eligible (missing, not Ready, cordoned, not selected or with untolerated taints)", target)
			continue
		}
		if owner, taken := used[target]; target != "" && taken && owner != o {
			p.Refused[o] = fmt.Sprintf("node %s holds member %d", target, owner)
			continue
		}
		if busy && !in.Parallel {
			p.Queued[o] = target
			continue
		}
		if target == "" {
			n, ok := pickFree(in.Nodes, used, p.Assign, fresh(o))
			if !ok {
				p.Refused[o] = fmt.Sprintf("no free eligible node without older data of member %d (name one, %d=<node>, to move it there)", o, o)
				continue
			}
			target = n
		}
		delete(used, cur)
		p.Assign[o], used[target] = target, o
		p.Started[o] = cur
		busy = true
	}

	for o := int32(0); o < in.Replicas; o++ {
		node, ok := p.Assign[o]
		if !ok {
			n, found := pickFree(in.Nodes, used, p.Assign, eligible)
			if !found {
				p.Waiting[o] = WaitNoEligibleNode
				continue
			}
			p.Assign[o], used[n] = n, o
			continue
		}
		switch n, exists := byName[node]; {
		case !exists:
			p.Waiting[o] = WaitNodeGone
		case n.NotReady:
			p.Waiting[o] = WaitNodeNotReady
		case n.Unschedulable:
			p.Waiting[o] = WaitNodeUnschedulable
		case !selects(in.Selector, n.Labels):
			p.Waiting[o] = WaitNodeNotSelected
		case !tolerates(in.Tolerations, n.Taints):
			p.Waiting[o] = WaitNodeTainted
		}
	}
	if in.NodeLoss != nil {
		p.moveLost(in, busy, used, fresh)
	}
	return p
}

// moveLost applies the NodeLoss rule (see Place) to the members waiting for
// a lost node.
func (p *Placement) moveLost(in PlacementInput, busy bool, used map[string]int32, fresh func(int32) func(string) bool) {
	rule := in.NodeLoss
	for _, o := range sortedKeys(p.Waiting) {
		if !lostNode(p.Waiting[o]) {
			continue
		}
		since, seen := in.LostSince[o]
		left := rule.After
		if seen {
			left = since.Add(rule.After).Sub(in.Now)
		}
		if left > 0 {
			p.Held[o] = fmt.Sprintf("moves to another node in %s unless its node returns (spec.nodeLoss)", left.Round(time.Second))
			if p.Recheck == 0 || left < p.Recheck {
				p.Recheck = left
			}
			continue
		}
		ready, notReady := int32(0), int32(-1)
		for m := int32(0); m < in.Replicas; m++ {
			switch {
			case m == o:
			case in.Ready[m]:
				ready++
			case notReady < 0:
				notReady = m
			}
		}
		var target string
		var ok bool
		switch {
		case busy:
			p.Held[o] = "not moved: another member is moving"
		case notReady >= 0:
			p.Held[o] = fmt.Sprintf("not moved: member %d is not Ready either", notReady)
		case ready < rule.Quorum:
			p.Held[o] = fmt.Sprintf("not moved: %d other members Ready, below the quorum of %d", ready, rule.Quorum)
		default:
			if target, ok = pickFree(in.Nodes, used, p.Assign, fresh(o)); !ok {
				p.Held[o] = "not moved: no free eligible node without older data of this member"
			}
		}
		if !ok {
			continue
		}
		cur := p.Assign[o]
		delete(used, cur)
		delete(p.Waiting, o)
		p.Assign[o], used[target] = target, o
		p.Started[o] = cur
		p.NodeLost[o] = in.Now.Sub(since)
		busy = true
	}
}

// lostNode reports whether a waiting reason means the member's node is lost.
func lostNode(reason string) bool { return reason == WaitNodeGone || reason == WaitNodeNotReady }

// FormatReassign is the annotation value of the entries in m (the inverse
// of ParseReassign), "" for none.
func FormatReassign(m map[int32]string) string {
	var b strings.Builder
	for _, o := range sortedKeys(m) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(o)))
		if m[o] != "" {
			b.WriteByte('=')
			b.WriteString(m[o])
		}
	}
	return b.String()
}

// pickFree returns the free eligible node in the zone with the fewest
// assigned members, ties broken by node name.
func pickFree(nodes []NodeInfo, used map[string]int32, assign map[int32]string, eligible func(string) bool) (string, bool) {
	zoneOf := map[string]string{}
	for _, n := range nodes {
		zoneOf[n.Name] = n.Labels[zoneLabel]
	}
	perZone := map[string]int{}
	for _, node := range assign {
		perZone[zoneOf[node]]++
	}
	var free []NodeInfo
	for _, n := range nodes {
		if _, taken := used[n.Name]; !taken && eligible(n.Name) {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return "", false
	}
	best := slices.MinFunc(free, func(a, b NodeInfo) int {
		return cmp.Or(cmp.Compare(perZone[a.Labels[zoneLabel]], perZone[b.Labels[zoneLabel]]), cmp.Compare(a.Name, b.Name))
	})
	return best.Name, true
}

func selects(selector, nodeLabels map[string]string) bool {
	return labels.SelectorFromSet(selector).Matches(labels.Set(nodeLabels))
}

// tolerates reports whether every NoSchedule and NoExecute taint is tolerated.
func tolerates(tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logr.Discard(), t, true) }) {
			return false
		}
	}
	return true
}

// ParseReassign parses the value of the flockd.io/reassign annotation:
// comma-separated "<ordinal>=<node>" or "<ordinal>" entries.
func ParseReassign(v string) (map[int32]string, error) {
	out := map[int32]string{}
	for entry := range strings.SplitSeq(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		ord, node, _ := strings.Cut(entry, "=")
		i, err := strconv.ParseInt(strings.TrimSpace(ord), 10, 32)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("reassign entry %q: want <ordinal>[=<node>]", entry)
		}
		if _, dup := out[int32(i)]; dup {
			return nil, fmt.Errorf("reassign entry %q: ordinal %d given twice", entry, i)
		}
		out[int32(i)] = strings.TrimSpace(node)
	}
	return out, nil
}

func sortedKeys[V any](m map[int32]V) []int32 {
	keys := make([]int32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CurrentAssignments merges where members' data is (their volumes) with
// the recorded status. The status wins when it records a move under way
// (movingFrom) or names one of the member's volumes' nodes; otherwise the
// volumes win, since the data is there: a bound volume first, then an
// available one, then a released one (a claim deleted or a namespace
// re-created leaves the data on that node, so the member goes back there).
func CurrentAssignments(members []flockv1.MemberStatus, pvs []corev1.PersistentVolume) map[int32]string {
	type candidate struct {
		rank int
		node string
	}
	rank := func(phase corev1.PersistentVolumePhase) int {
		switch phase {
		case corev1.VolumeBound:
			return 0
		case corev1.VolumeReleased, corev1.VolumeFailed:
			return 2
		}
		return 1
	}
	onDisk := map[int32][]candidate{}
	for i := range pvs {
		pv := &pvs[i]
		if pv.DeletionTimestamp != nil {
			continue
		}
		ord, err := strconv.ParseInt(pv.Labels[flockv1.MemberLabel], 10, 32)
		node := pv.Annotations[nodeAnnotation]
		if err != nil || node == "" || ord < 0 {
			continue
		}
		onDisk[int32(ord)] = append(onDisk[int32(ord)], candidate{rank(pv.Status.Phase), node})
	}
	out := map[int32]string{}
	moving := map[int32]bool{}
	for _, m := range members {
		if m.Node != "" {
			out[m.Ordinal] = m.Node
			moving[m.Ordinal] = m.MovingFrom != ""
		}
	}
	for ord, cands := range onDisk {
		if cur, ok := out[ord]; ok && (moving[ord] || slices.ContainsFunc(cands, func(c candidate) bool { return c.node == cur })) {
			continue
		}
		best := slices.MinFunc(cands, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.node, b.node)) })
		out[ord] = best.node
	}
	return out
}
