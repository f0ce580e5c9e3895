package bootstrap

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
)

// Member is one member's data identity in the cluster record: its pod and
// the PersistentVolumeClaims its volumes use. A member's data exists while
// one of its claims exists with the recorded UID or, for a member without
// claims (emptyDir data), while its pod exists with the recorded UID.
type Member struct {
	Pod    string  `json:"pod"`
	UID    string  `json:"uid"`
	Claims []Claim `json:"claims,omitempty"`
}

// Claim names one PersistentVolumeClaim by name and UID: a claim deleted
// and created again under the same name is a different claim.
type Claim struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// sharesData reports whether m and o name a common claim.
func (m Member) sharesData(o Member) bool {
	for _, a := range m.Claims {
		for _, b := range o.Claims {
			if a == b {
				return true
			}
		}
	}
	return false
}

// Data reads members' data identities from the API.
//
// RBAC: get on pods and on persistentvolumeclaims.
type Data struct {
	Client    *kube.Client
	Namespace string
}

// Self returns pod's data identity: its UID and the claims its volumes use
// (persistentVolumeClaim volumes and generic ephemeral volumes).
func (d *Data) Self(ctx context.Context, pod string) (Member, error) {
	p, err := d.Client.Pods(d.Namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return Member{}, fmt.Errorf("read pod %s/%s for its UID and claims: %w", d.Namespace, pod, err)
	}
	m := Member{Pod: p.Name, UID: string(p.UID)}
	for _, v := range p.Spec.Volumes {
		var name string
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = p.Name + "-" + v.Name // the generic ephemeral volume's claim
		default:
			continue
		}
		c, err := d.Client.Claims(d.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return Member{}, fmt.Errorf("read claim %s/%s of pod %s: %w", d.Namespace, name, pod, err)
		}
		m.Claims = append(m.Claims, Claim{Name: c.Name, UID: string(c.UID)})
	}
	return m, nil
}

// Exists reports whether m's data still exists (see Member).
func (d *Data) Exists(ctx context.Context, m Member) (bool, error) {
	if len(m.Claims) == 0 {
		p, err := d.Client.Pods(d.Namespace).Get(ctx, m.Pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read pod %s/%s of a recorded member: %w", d.Namespace, m.Pod, err)
		}
		return string(p.UID) == m.UID, nil
	}
	for _, c := range m.Claims {
		got, err := d.Client.Claims(d.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read claim %s/%s of recorded member %s: %w", d.Namespace, c.Name, m.Pod, err)
		}
		if string(got.UID) == c.UID && got.DeletionTimestamp == nil { // a terminating claim's data is going
			return true, nil
		}
	}
	return false, nil
}

// Pod returns name's UID and Ready condition; ok is false when no such pod
// exists. WasReady compares the Ready and Initialized conditions' last
// transitions, both written by the pod's kubelet (or, for Ready on a lost
// node, by the node controller, later).
func (d *Data) Pod(ctx context.Context, name string) (st PodState, ok bool, err error) {
	p, err := d.Client.Pods(d.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return PodState{}, false, nil
	}
	if err != nil {
		return PodState{}, false, fmt.Errorf("read pod %s/%s for its rank: %w", d.Namespace, name, err)
	}
	return podState(p), true, nil
}

// podState reads a pod's UID, Ready and WasReady (unknown counts as was).
func podState(p *corev1.Pod) PodState {
	st := PodState{UID: string(p.UID), WasReady: true}
	var ready, initialized *corev1.PodCondition
	for i, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodReady:
			ready = &p.Status.Conditions[i]
		case corev1.PodInitialized:
			initialized = &p.Status.Conditions[i]
		}
	}
	st.Ready = ready != nil && ready.Status == corev1.ConditionTrue
	if !st.Ready && ready != nil && initialized != nil && initialized.Status == corev1.ConditionTrue {
		// Not Ready since a time no later than the init containers' end:
		// not Ready since it was told its role.
		st.WasReady = ready.LastTransitionTime.After(initialized.LastTransitionTime.Time)
	}
	return st
}
