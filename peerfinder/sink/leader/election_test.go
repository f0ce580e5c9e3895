package leader

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClaim(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const d = 15 * time.Second
	spec := func(holder string, secs, transitions int32, acquired time.Time) *coordinationv1.LeaseSpec {
		a := metav1.NewMicroTime(acquired)
		return &coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, LeaseTransitions: &transitions, AcquireTime: &a, RenewTime: &a}
	}
	for _, tt := range []struct {
		name            string
		cur             *coordinationv1.LeaseSpec
		seen            time.Time // when the candidate saw cur first
		now             time.Time
		wantOK          bool
		wantTransitions int32
		wantAcquired    time.Time
	}{
		{name: "no lease: create", now: t0, wantOK: true, wantTransitions: 0, wantAcquired: t0},
		{name: "nobody holds it", cur: spec("", 1, 3, t0), seen: t0, now: t0.Add(time.Second), wantOK: true, wantTransitions: 4, wantAcquired: t0.Add(time.Second)},
		{name: "another holds it, not expired", cur: spec("b", 15, 1, t0), seen: t0, now: t0.Add(14 * time.Second)},
		{name: "another's record expired as seen here", cur: spec("b", 15, 1, t0), seen: t0, now: t0.Add(15 * time.Second), wantOK: true, wantTransitions: 2, wantAcquired: t0.Add(15 * time.Second)},
		// The record's own renewTime is another machine's clock: an old
		// renewTime seen only now is not expired.
		{name: "old renewTime, just seen", cur: spec("b", 15, 1, t0.Add(-time.Hour)), seen: t0, now: t0.Add(time.Second)},
		{name: "the record's duration counts, not ours", cur: spec("b", 60, 1, t0), seen: t0, now: t0.Add(30 * time.Second)},
		{name: "renew own: acquire time and transitions kept", cur: spec("a", 15, 5, t0), seen: t0, now: t0.Add(2 * time.Second), wantOK: true, wantTransitions: 5, wantAcquired: t0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next, ok := claim(tt.cur, observed{at: tt.seen}, "a", d, tt.now)
			if ok != tt.wantOK {
				t.Fatalf("claim ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if got := deref(next.HolderIdentity); got != "a" {
				t.Errorf("holder %q, want a", got)
			}
			if got := deref(next.LeaseDurationSeconds); got != 15 {
				t.Errorf("duration %ds, want 15", got)
			}
			if got := deref(next.LeaseTransitions); got != tt.wantTransitions {
				t.Errorf("transitions %d, want %d", got, tt.wantTransitions)
			}
			if !next.AcquireTime.Time.Equal(tt.wantAcquired) || !next.RenewTime.Time.Equal(tt.now) {
				t.Errorf("acquired %v renewed %v, want %v and %v", next.AcquireTime, next.RenewTime, tt.wantAcquired, tt.now)
			}
		})
	}
}
