package apps

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Describe is what a failed round's logs alone do not say: each
// StatefulSet's status, each pod's node, phase, conditions and containers'
// states (a pod never created, never scheduled or never Ready shows here,
// not in any log), and the namespace's events in time order. at is when
// it was read; times are shown relative to it.
func Describe(sets []appsv1.StatefulSet, pods []corev1.Pod, events []corev1.Event, at time.Time) string {
	var b strings.Builder
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return at.Sub(t).Truncate(100*time.Millisecond).String() + " ago"
	}
	fmt.Fprintf(&b, "read at %s\n", at.UTC().Format(time.RFC3339))
	for _, s := range sets {
		want := int32(1)
		if s.Spec.Replicas != nil {
			want = *s.Spec.Replicas
		}
		fmt.Fprintf(&b, "statefulset %s: spec.replicas %d, policy %s; status replicas %d, ready %d, available %d, observed generation %d of %d\n",
			s.Name, want, s.Spec.PodManagementPolicy, s.Status.Replicas, s.Status.ReadyReplicas, s.Status.AvailableReplicas, s.Status.ObservedGeneration, s.Generation)
	}
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pods {
		fmt.Fprintf(&b, "pod %s (uid %s): node %q, phase %s, ip %q, created %s", p.Name, p.UID, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, ago(p.CreationTimestamp.Time))
		if p.DeletionTimestamp != nil {
			fmt.Fprintf(&b, ", deleting since %s", ago(p.DeletionTimestamp.Time))
		}
		b.WriteString("\n")
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s since %s", c.Type, c.Status, ago(c.LastTransitionTime.Time))
			if c.Reason != "" || c.Message != "" {
				fmt.Fprintf(&b, ": %s %s", c.Reason, c.Message)
			}
			b.WriteString("\n")
		}
		for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  container %s: ready %v, restarts %d, %s\n", cs.Name, cs.Ready, cs.RestartCount, stateOf(cs.State, ago))
		}
	}
	events = slices.Clone(events)
	when := func(e corev1.Event) time.Time {
		for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
			if !t.IsZero() {
				return t
			}
		}
		return time.Time{}
	}
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return when(a).Compare(when(b)) })
	for _, e := range events {
		fmt.Fprintf(&b, "event %s %s %s/%s x%d: %s %s\n", when(e).UTC().Format("15:04:05"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, max(e.Count, 1), e.Reason, strings.TrimSpace(e.Message))
	}
	return b.String()
}

// stateOf says a container's state in a few words.
func stateOf(s corev1.ContainerState, ago func(time.Time) string) string {
	switch {
	case s.Running != nil:
		return "running since " + ago(s.Running.StartedAt.Time)
	case s.Waiting != nil:
		return strings.TrimSpace("waiting: " + s.Waiting.Reason + " " + s.Waiting.Message)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated %s: exit %d %s", ago(s.Terminated.FinishedAt.Time), s.Terminated.ExitCode, s.Terminated.Reason)
	}
	return "no state"
}
