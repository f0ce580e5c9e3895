package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
)

// Annotations and labels peer-finder writes on its cluster-record Lease.
const (
	// AnnotationUID is the UID of the pod named in spec.holderIdentity.
	AnnotationUID = "bootstrap.flockd.io/formed-by-uid"
	// AnnotationMember is the FQDN of the member that formed the cluster.
	AnnotationMember = "bootstrap.flockd.io/formed-by-member"
	// AnnotationMembers is the JSON list of the members' data identities
	// ([]Member): the member that formed and every member told to join.
	AnnotationMembers = "bootstrap.flockd.io/members"
	// AnnotationRankPrefix starts the annotation of each member's rank
	// under -form-rank: AnnotationRankPrefix + pod name, a JSON Rank.
	AnnotationRankPrefix = "rank.bootstrap.flockd.io/"
	// LabelManagedBy marks the Lease as peer-finder's.
	LabelManagedBy = "app.kubernetes.io/managed-by"
)

// Lease is a cluster record kept in a coordination.k8s.io/v1 Lease: its
// spec.holderIdentity names the pod that formed the cluster, an annotation
// its UID and another the members' data identities. It is a record, not a
// lock: it has no duration, is never renewed and never expires.
//
// RBAC: create on leases, and get and update on the named Lease.
type Lease struct {
	// Leases is the Lease client of a namespace, e.g. kube.Client.Leases.
	Leases    func(namespace string) kube.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	Namespace string
	Name      string
	// Now is the clock for spec.acquireTime; nil means time.Now.
	Now func() time.Time
}

// Read returns the record, or nil when the Lease does not exist or names
// nobody and lists no member.
func (l *Lease) Read(ctx context.Context) (*Record, error) {
	obj, err := l.Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return recordOf(obj), nil
}

// ErrChanged is returned by Replace and Register when the Lease changed
// since it was read: read it again and decide again.
var ErrChanged = errors.New("cluster record changed since it was read")

// Replace writes rec over prev, the record last read, unless the Lease
// changed since (then ErrChanged). It starts a new formation over a record
// whose members' data is all gone.
func (l *Lease) Replace(ctx context.Context, prev *Record, rec Record, member string) error {
	return l.update(ctx, prev, func(obj *coordinationv1.Lease) error { return l.fill(obj, rec, member) })
}

// Register writes members as the record's member list over prev, the
// record last read, unless the Lease changed since (then ErrChanged).
func (l *Lease) Register(ctx context.Context, prev *Record, members []Member) error {
	return l.update(ctx, prev, func(obj *coordinationv1.Lease) error { return setMembers(obj, members) })
}

func (l *Lease) update(ctx context.Context, prev *Record, change func(*coordinationv1.Lease) error) error {
	leases := l.Leases(l.Namespace)
	obj, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ErrChanged
	}
	if err != nil {
		return fmt.Errorf("read lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	if obj.ResourceVersion != prev.version {
		return ErrChanged
	}
	obj = obj.DeepCopy()
	if err := change(obj); err != nil {
		return err
	}
	_, err = leases.Update(ctx, obj, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return ErrChanged
	}
	if err != nil {
		return fmt.Errorf("update lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return nil
}

// Claim writes rec into the Lease unless it already names a pod. It
// creates the Lease when absent, or updates an existing Lease that names
// nobody using the resourceVersion it read, so of concurrent claims exactly
// one succeeds. It returns the record now in force: rec when this claim won,
// the other pod's record when it lost.
func (l *Lease) Claim(ctx context.Context, rec Record, member string) (*Record, error) {
	leases := l.Leases(l.Namespace)
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			return nil, fmt.Errorf("claim lease %s/%s: still conflicting after %d attempts", l.Namespace, l.Name, attempt)
		}
		obj, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			obj = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace}}
			if err := l.fill(obj, rec, member); err != nil {
				return nil, err
			}
			_, err = leases.Create(ctx, obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // someone else created it first: read theirs
			}
			if err != nil {
				return nil, fmt.Errorf("create lease %s/%s: %w", l.Namespace, l.Name, err)
			}
			return &rec, nil
		case err != nil:
			return nil, fmt.Errorf("read lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		if cur := recordOf(obj); cur != nil {
			if cur.Pod == "" {
				// Members told to join are listed: the caller fills the
				// record keeping them (Replace).
				return nil, ErrChanged
			}
			return cur, nil
		}
		obj = obj.DeepCopy()
		if err := l.fill(obj, rec, member); err != nil {
			return nil, err
		}
		_, err = leases.Update(ctx, obj, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue // changed since we read it: read again
		}
		if err != nil {
			return nil, fmt.Errorf("update lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		return &rec, nil
	}
}

// Open creates the Lease naming no former, with members: a member told to
// join before any member formed records its data identity, so that the
// cluster it joins is known to exist by its data. ErrChanged when the Lease
// exists by now: read it again and decide again.
func (l *Lease) Open(ctx context.Context, members []Member) error {
	obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace,
		Labels: map[string]string{LabelManagedBy: "peer-finder"}}}
	if err := setMembers(obj, members); err != nil {
		return err
	}
	_, err := l.Leases(l.Namespace).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return ErrChanged
	}
	if err != nil {
		return fmt.Errorf("create lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return nil
}

func (l *Lease) fill(obj *coordinationv1.Lease, rec Record, member string) error {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[LabelManagedBy] = "peer-finder"
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[AnnotationUID] = rec.UID
	if member != "" {
		obj.Annotations[AnnotationMember] = member
	}
	holder := rec.Pod
	at := metav1.NewMicroTime(now())
	if obj.Spec.HolderIdentity != nil {
		// A former written over an existing record: a new epoch.
		n := int32(1)
		if obj.Spec.LeaseTransitions != nil {
			n += *obj.Spec.LeaseTransitions
		}
		obj.Spec.LeaseTransitions = &n
	}
	obj.Spec.HolderIdentity = &holder
	obj.Spec.AcquireTime = &at
	obj.Spec.LeaseDurationSeconds = nil
	obj.Spec.RenewTime = nil
	return setMembers(obj, rec.Members)
}

func setMembers(obj *coordinationv1.Lease, members []Member) error {
	if members == nil {
		delete(obj.Annotations, AnnotationMembers)
		return nil
	}
	b, err := json.Marshal(members)
	if err != nil {
		return fmt.Errorf("encode members: %w", err)
	}
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[AnnotationMembers] = string(b)
	return nil
}

// recordOf returns the Lease's record: nil when it names nobody and lists
// no member, a record without Pod when members told to join wrote it before
// any member formed. A member list that cannot be decoded reads as none (an
// unknown, so never stale).
func recordOf(obj *coordinationv1.Lease) *Record {
	r := &Record{version: obj.ResourceVersion}
	if t := obj.Spec.LeaseTransitions; t != nil {
		r.Epoch = *t
	}
	if h := obj.Spec.HolderIdentity; h != nil && *h != "" {
		r.Pod, r.UID, r.Member = *h, obj.Annotations[AnnotationUID], obj.Annotations[AnnotationMember]
	}
	if s, ok := obj.Annotations[AnnotationMembers]; ok {
		var ms []Member
		if json.Unmarshal([]byte(s), &ms) == nil {
			r.Members = ms
		}
	}
	for k, v := range obj.Annotations {
		pod, ok := strings.CutPrefix(k, AnnotationRankPrefix)
		var rk Rank
		if !ok || json.Unmarshal([]byte(v), &rk) != nil {
			continue // an entry that cannot be decoded is missing
		}
		if r.Ranks == nil {
			r.Ranks = map[string]Rank{}
		}
		r.Ranks[pod] = rk
	}
	if r.Pod == "" && len(r.Members) == 0 {
		return nil
	}
	return r
}

// setRank writes pod's rank entry.
func setRank(obj *coordinationv1.Lease, pod string, rk Rank) error {
	b, err := json.Marshal(rk)
	if err != nil {
		return fmt.Errorf("encode rank of %s: %w", pod, err)
	}
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[AnnotationRankPrefix+pod] = string(b)
	return nil
}
