package controller

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

// Observed is what the reconciler saw and did; Status turns it into the
// Flock's status.
type Observed struct {
	Flock *flockv1.Flock
	Mode  flockv1.Mode
	// Placement is the NodePinned placement (empty otherwise).
	Placement Placement
	// StatefulSet is the live StatefulSet, nil if it does not exist yet.
	StatefulSet *appsv1.StatefulSet
	// Pods are the Flock's member pods.
	Pods []corev1.Pod
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
		ord, ok := ordinal(f.Name, p.Name)
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
	movingFrom := map[int32]string{}
	for _, m := range f.Status.Members {
		movingFrom[m.Ordinal] = m.MovingFrom
	}
	var waiting []string
	for _, ord := range sortedKeys(ords) {
		m := flockv1.MemberStatus{Ordinal: ord, Active: ord < want, Node: o.Placement.Assign[ord], MovingFrom: movingFrom[ord]}
		if from, ok := o.Placement.Started[ord]; ok {
			m.MovingFrom = from
		} else if p := pods[ord]; p != nil && m.MovingFrom != "" && podReady(p) && p.Spec.NodeName == m.Node {
			m.MovingFrom = "" // the move is done
		}
		if p := pods[ord]; p != nil {
			m.Ready = podReady(p)
			if m.Node == "" {
				m.Node = p.Spec.NodeName
			}
		}
		if m.Active {
			m.Waiting = o.Placement.Waiting[ord]
			// A member still running on its cordoned node is not waiting.
			if p := pods[ord]; m.Waiting == WaitNodeUnschedulable && p != nil && p.Spec.NodeName == m.Node {
				m.Waiting = ""
			}
		}
		if m.Waiting != "" {
			waiting = append(waiting, fmt.Sprintf("%s-%d: %s", f.Name, ord, waitMessage(m.Waiting, m.Node)))
		}
		st.Members = append(st.Members, m)
	}
	for ord, why := range o.Placement.Waiting { // unplaced members are not in Assign
		if !ords[ord] && ord < want {
			st.Members = append(st.Members, flockv1.MemberStatus{Ordinal: ord, Active: true, Waiting: why})
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

// ErrorStatus is the status after a failed reconcile: the last good status
// (members, counts, observedGeneration) stays, and the Degraded condition
// says what failed. It is pure.
func ErrorStatus(last flockv1.FlockStatus, generation int64, err error) flockv1.FlockStatus {
	st := *last.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: flockv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "ReconcileError",
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

func waitMessage(reason, node string) string {
	switch reason {
	case WaitNodeGone:
		return fmt.Sprintf("node %s is gone; its data stays there (see %s)", node, flockv1.ReassignAnnotation)
	case WaitNodeUnschedulable:
		return fmt.Sprintf("node %s is unschedulable; the member waits for it", node)
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

// ordinal parses "<flock>-<i>".
func ordinal(flock, pod string) (int32, bool) {
	s, ok := strings.CutPrefix(pod, flock+"-")
	if !ok || s == "" {
		return 0, false
	}
	var n int32
	for _, c := range s {
		if c < '0' || c > '9' || n > (1<<31-1)/10-1 {
			return 0, false
		}
		n = n*10 + c - '0'
	}
	return n, true
}
