package leader

import (
	"context"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
)

// Leader election on a coordination.k8s.io/v1 Lease, with the semantics of
// client-go's tools/leaderelection (which peer-finder does not link: it
// pulls client-go's clientset and every API group in with it). A candidate
// takes the Lease when it names nobody or when its record has not changed
// for LeaseDuration as seen by this candidate's own clock (never by the
// renewTime written by another machine's clock), renews it every
// RetryPeriod, steps down when it could not renew within RenewDeadline, and
// on shutdown releases it (holder cleared, duration 1s). Every write carries
// the resourceVersion read, so of concurrent writers one wins.

// observed is the last Lease record seen and when this candidate first saw it.
type observed struct {
	spec coordinationv1.LeaseSpec
	at   time.Time
}

// claim decides whether identity may hold a Lease whose current record is
// cur (nil: the Lease does not exist), seen unchanged since obs.at, at now;
// when it may, it returns the record to write. It is pure.
func claim(cur *coordinationv1.LeaseSpec, obs observed, identity string, duration time.Duration, now time.Time) (coordinationv1.LeaseSpec, bool) {
	t := metav1.NewMicroTime(now)
	secs := int32(duration / time.Second)
	next := coordinationv1.LeaseSpec{HolderIdentity: &identity, LeaseDurationSeconds: &secs, AcquireTime: &t, RenewTime: &t}
	if cur == nil {
		zero := int32(0)
		next.LeaseTransitions = &zero
		return next, true
	}
	holder := deref(cur.HolderIdentity)
	if holder != "" && holder != identity && now.Before(obs.at.Add(leaseDuration(cur, duration))) {
		return coordinationv1.LeaseSpec{}, false // held by another and not expired
	}
	transitions := deref(cur.LeaseTransitions)
	if holder == identity {
		if cur.AcquireTime != nil {
			next.AcquireTime = cur.AcquireTime
		}
	} else {
		transitions++
	}
	next.LeaseTransitions = &transitions
	return next, true
}

// leaseDuration is the record's own duration, else ours.
func leaseDuration(spec *coordinationv1.LeaseSpec, ours time.Duration) time.Duration {
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds > 0 {
		return time.Duration(*spec.LeaseDurationSeconds) * time.Second
	}
	return ours
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// elector campaigns for one Lease.
type elector struct {
	leases                                    kube.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	namespace, name, identity                 string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	now                                       func() time.Time

	obs observed
}

// tryAcquireOrRenew reads the Lease and writes this candidate into it when
// claim allows. It reports whether this candidate holds the Lease now.
func (e *elector) tryAcquireOrRenew(ctx context.Context) bool {
	now := e.now()
	lease, err := e.leases.Get(ctx, e.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		spec, _ := claim(nil, observed{}, e.identity, e.leaseDuration, now)
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e.namespace}, Spec: spec}
		if _, err := e.leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return false
		}
		e.obs = observed{spec: spec, at: now}
		return true
	case err != nil:
		return false
	}
	if !equality.Semantic.DeepEqual(lease.Spec, e.obs.spec) {
		e.obs = observed{spec: *lease.Spec.DeepCopy(), at: now}
	}
	spec, ok := claim(&lease.Spec, e.obs, e.identity, e.leaseDuration, now)
	if !ok {
		return false
	}
	lease.Spec = spec
	if _, err := e.leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return false
	}
	e.obs = observed{spec: spec, at: now}
	return true
}

// release clears the holder when this candidate holds the Lease, so the
// next candidate takes over at once instead of after LeaseDuration.
func (e *elector) release(ctx context.Context) {
	lease, err := e.leases.Get(ctx, e.name, metav1.GetOptions{})
	if err != nil || deref(lease.Spec.HolderIdentity) != e.identity {
		return
	}
	t, one, empty := metav1.NewMicroTime(e.now()), int32(1), ""
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &empty, &one
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &t, &t
	_, _ = e.leases.Update(ctx, lease, metav1.UpdateOptions{})
}

// campaign acquires the Lease (trying every RetryPeriod with jitter), calls
// lead with a context that ends when leadership does, keeps renewing, and
// returns when leadership was lost or ctx ended (after releasing the Lease).
func (e *elector) campaign(ctx context.Context, lead func(context.Context), stopped func()) {
	for !e.tryAcquireOrRenew(ctx) {
		if !sleep(ctx, e.retryPeriod+rand.N(e.retryPeriod*6/5)) {
			return
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	lead(lctx)
	for sleep(ctx, e.retryPeriod) && e.renew(ctx) {
	}
	// Stop writing before anyone else can take over.
	cancel()
	stopped()
	if ctx.Err() != nil {
		rctx, c := context.WithTimeout(context.Background(), e.renewDeadline)
		e.release(rctx)
		c()
	}
}

// renew tries every RetryPeriod until it renewed or RenewDeadline passed.
func (e *elector) renew(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, e.renewDeadline)
	defer cancel()
	for {
		if e.tryAcquireOrRenew(rctx) {
			return true
		}
		if !sleep(rctx, e.retryPeriod) {
			return false
		}
	}
}

// sleep waits d and reports false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
