package controller

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/internal/ordinal"
)

// Observed is what the reconciler saw and did; Status turns it into the
// Flock's status.
type Observed struct {
	Flock *flockv1.Flock
	Mode  flockv1.Mode
	// Now is when the reconcile observed it.
	Now time.Time
	// Placement is the NodePinned placement (empty otherwise).
	Placement Placement
	// StatefulSet is the live StatefulSet, nil if it does not exist yet.
	StatefulSet *appsv1.StatefulSet
	// Pods are the Flock's member pods.
	Pods []corev1.Pod
	// Volumes are the Flock's node-local volumes (NodePinned mode).
	Volumes []corev1.PersistentVolume
	// Hostnames maps node names to their kubernetes.io/hostname label
	// (NodePinned mode).
	Hostnames map[string]string
}

// Status computes the Flock's status from what a successful reconcile
// observed. It is pure: conditions keep their transition times when their
// status is unchanged.
func Status(o Observed) flockv1.FlockStatus {
	f := o.Flock
	st := flockv1.FlockStatus{
		ObservedGeneration: f.Generation,
		Mode:               o.Mode,
		Selector:           labels.SelectorFromSet(SelectorLabels(f)).String(),
		Conditions:         slices.Clone(f.Status.Conditions),
	}
	want := replicas(f)
	pods := map[int32]*corev1.Pod{}
	for i := range o.Pods {
		p := &o.Pods[i]
		ord, ok := memberOrdinal(f, p)
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		pods[ord] = p
		st.Replicas++
		if podReady(p) {
			st.ReadyReplicas++
		}
	}

	ords := map[int32]bool{}
	for o := range o.Placement.Assign {
		ords[o] = true
	}
	for o := range pods {
		ords[o] = true
	}
	prev := map[int32]flockv1.MemberStatus{}
	for _, m := range f.Status.Members {
		prev[m.Ordinal] = m
	}
	var waiting []string
	for _, ord := range sortedKeys(ords) {
		m := flockv1.MemberStatus{Ordinal: ord, Active: ord < want, Node: o.Placement.Assign[ord],
			MovingFrom: prev[ord].MovingFrom, MoveReason: prev[ord].MoveReason}
		if from, ok := o.Placement.Started[ord]; ok {
			m.MovingFrom, m.MoveReason = from, MoveRequested
			if _, ok := o.Placement.NodeLost[ord]; ok {
				m.MoveReason = MoveNodeLost
			}
		} else if p := pods[ord]; p != nil && m.MovingFrom != "" && podReady(p) && p.Spec.NodeName == m.Node {
			m.MovingFrom, m.MoveReason = "", "" // the move is done
		}
		if p := pods[ord]; p != nil {
			m.Ready = podReady(p)
			if m.Node == "" {
				m.Node = p.Spec.NodeName
			}
		}
		if m.Active {
			m.Waiting = o.Placement.Waiting[ord]
			if m.Waiting == "" {
				m.Waiting = volumeWait(o, ord, m.Node)
			}
			// A member still running on its node is not waiting, whatever
			// became of the node since; unless the node is not Ready, when
			// the pod's status is the last its kubelet reported.
			if p := pods[ord]; m.Waiting != "" && m.Waiting != WaitNoEligibleNode && m.Waiting != WaitNodeNotReady && p != nil && p.Spec.NodeName == m.Node && (podReady(p) || p.Status.Phase == corev1.PodRunning) {
				m.Waiting = ""
			}
		}
		if m.Waiting != "" {
			m.WaitingSince = waitingSince(prev[ord], m.Waiting, o.Now)
			msg := waitMessage(m.Waiting, m.Node)
			if held := o.Placement.Held[ord]; held != "" {
				msg += "; " + held
			}
			waiting = append(waiting, fmt.Sprintf("%s-%d: %s", f.Name, ord, msg))
		}
		st.Members = append(st.Members, m)
	}
	for ord, why := range o.Placement.Waiting { // unplaced members are not in Assign
		if !ords[ord] && ord < want {
			st.Members = append(st.Members, flockv1.MemberStatus{Ordinal: ord, Active: true, Waiting: why, WaitingSince: waitingSince(prev[ord], why, o.Now)})
			waiting = append(waiting, fmt.Sprintf("%s-%d: %s", f.Name, ord, waitMessage(why, "")))
		}
	}
	slices.SortFunc(st.Members, func(a, b flockv1.MemberStatus) int { return int(a.Ordinal - b.Ordinal) })
	slices.Sort(waiting)

	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: f.Generation,
		})
	}
	if st.ReadyReplicas >= want && st.Replicas == want {
		set(flockv1.ConditionAvailable, metav1.ConditionTrue, "AllMembersReady", fmt.Sprintf("%d of %d members ready", st.ReadyReplicas, want))
	} else {
		set(flockv1.ConditionAvailable, metav1.ConditionFalse, "MembersNotReady", fmt.Sprintf("%d of %d members ready", st.ReadyReplicas, want))
	}
	switch {
	case len(waiting) > 0:
		set(flockv1.ConditionDegraded, metav1.ConditionTrue, "MembersWaiting", joinBounded(waiting))
	default:
		set(flockv1.ConditionDegraded, metav1.ConditionFalse, "AsExpected", "no member is waiting")
	}
	switch {
	case stsRolledOut(o.StatefulSet, want) && st.Replicas == want && st.ReadyReplicas == want:
		set(flockv1.ConditionProgressing, metav1.ConditionFalse, "Stable", fmt.Sprintf("%d members up to date", want))
	case len(waiting) > 0:
		set(flockv1.ConditionProgressing, metav1.ConditionFalse, "MembersWaiting", "blocked until waiting members can run")
	default:
		set(flockv1.ConditionProgressing, metav1.ConditionTrue, "Scaling", fmt.Sprintf("%d of %d members ready", st.ReadyReplicas, want))
	}
	return st
}

// Move reasons (status.members[].moveReason).
const (
	MoveRequested = "Requested" // the flockd.io/reassign annotation
	MoveNodeLost  = "NodeLost"  // spec.nodeLoss policy Reassign
)

// waitingSince is when a member waiting for reason started waiting: as
// recorded before if it waited for the same reason (any lost-node reason
// counts as one), else now, to the second (as the API keeps it).
func waitingSince(prev flockv1.MemberStatus, reason string, now time.Time) *metav1.Time {
	if prev.WaitingSince != nil && (prev.Waiting == reason || lostNode(prev.Waiting) && lostNode(reason)) {
		return prev.WaitingSince.DeepCopy()
	}
	return &metav1.Time{Time: now.Truncate(time.Second)}
}

// ErrorStatus is the status after a failed or refused reconcile: the last
// good status (members, counts, observedGeneration) stays, and the Degraded
// condition says what failed (reason ReconcileError, or the Refusal's
// reason). It is pure.
func ErrorStatus(last flockv1.FlockStatus, generation int64, err error) flockv1.FlockStatus {
	st := *last.DeepCopy()
	reason := "ReconcileError"
	var ref *Refusal
	if errors.As(err, &ref) {
		reason = ref.Reason
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: flockv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason,
		Message: bounded(err.Error()), ObservedGeneration: generation,
	})
	return st
}

// maxMessage bounds condition and Event messages (the API server refuses
// condition messages over 32 KiB, and Events are for people).
const maxMessage = 1024

// bounded cuts s to at most maxMessage bytes, on a rune boundary.
func bounded(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len(" ...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " ..."
}

// maxListed is how many waiting members a condition message names.
const maxListed = 10

// joinBounded joins the first maxListed items and counts the rest.
func joinBounded(items []string) string {
	if len(items) <= maxListed {
		return bounded(strings.Join(items, "; "))
	}
	return bounded(fmt.Sprintf("%s; and %d more", strings.Join(items[:maxListed], "; "), len(items)-maxListed))
}

// volumeWait says why member ord's volumes keep it off node: one is
// Released (until the controller binds it to the member's new claim), or
// pins a hostname the node no longer has.
func volumeWait(o Observed, ord int32, node string) string {
	for i := range o.Volumes {
		pv := &o.Volumes[i]
		if pv.Labels[flockv1.MemberLabel] != strconv.Itoa(int(ord)) || pv.Annotations[nodeAnnotation] != node {
			continue
		}
		if pv.Status.Phase == corev1.VolumeReleased {
			return WaitVolumeReleased
		}
		if host, ok := o.Hostnames[node]; ok && pinnedHostname(pv) != "" && pinnedHostname(pv) != host {
			return WaitNodeRelabelled
		}
	}
	return ""
}

// pinnedHostname is the kubernetes.io/hostname value a local volume's node
// affinity requires.
func pinnedHostname(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Key == hostnameLabel && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

func waitMessage(reason, node string) string {
	switch reason {
	case WaitNodeGone:
		return fmt.Sprintf("node %s is gone; its data stays there (see %s)", node, flockv1.ReassignAnnotation)
	case WaitNodeNotReady:
		return fmt.Sprintf("node %s is not Ready (its kubelet stopped reporting: a partition, a crash or a power loss); the member waits for it, its data is there (see %s to move it)", node, flockv1.ReassignAnnotation)
	case WaitNodeUnschedulable:
		return fmt.Sprintf("node %s is unschedulable; the member waits for it", node)
	case WaitNodeNotSelected:
		return fmt.Sprintf("node %s no longer matches nodeSelector; the member waits for it (its data is there; see %s)", node, flockv1.ReassignAnnotation)
	case WaitNodeTainted:
		return fmt.Sprintf("node %s has a NoSchedule or NoExecute taint the Flock does not tolerate; the member waits for it", node)
	case WaitVolumeReleased:
		return fmt.Sprintf("its volume on node %s is Released; the controller binds it to the member's new claim", node)
	case WaitNodeRelabelled:
		return fmt.Sprintf("node %s changed its %s label, which the member's volumes are pinned to", node, hostnameLabel)
	case WaitNoEligibleNode:
		return "no free eligible node"
	}
	return reason
}

func stsRolledOut(s *appsv1.StatefulSet, want int32) bool {
	if s == nil {
		return false
	}
	return s.Status.ObservedGeneration >= s.Generation &&
		s.Status.Replicas == want && s.Status.UpdatedReplicas == want &&
		(s.Status.UpdateRevision == "" || s.Status.CurrentRevision == s.Status.UpdateRevision)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// memberOrdinal is the pod's ordinal in the Flock's StatefulSet (named after the
// Flock), by ordinal.Of; ok is false for a pod that is not one of its members.
func memberOrdinal(f *flockv1.Flock, p *corev1.Pod) (int32, bool) {
	n := ordinal.Of(p.Name, p.Labels, f.Name)
	return int32(n), n >= 0
}
