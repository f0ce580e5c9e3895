package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/localcluster/clustertest"
	flockbootstrap "github.com/flockd/flock/peerfinder/bootstrap"
	"github.com/flockd/flock/peerfinder/peer"
)

// TestRolerRankRaceExactlyOneForms is a cold start after a full shutdown
// (-form-rank), many rounds against the real API server: the members'
// pods (never scheduled, so never Ready) and claims exist, each round's
// Lease names a former of an earlier pod, and every member, with its own
// client, runs its rank command (a real process) and asks for its role at
// the same moment until it gets one. In every round exactly one is told
// form, it is the highest rank (ties: the lowest ordinal), the Lease names
// it, and every member is given it as its former. Every third round one
// member's command fails and a quorum of the others decides without it.
func TestRolerRankRaceExactlyOneForms(t *testing.T) {
	const rounds, members = 20, 5
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*wait)
	defer cancel()
	var claims []flockbootstrap.Claim
	for i := range members {
		name := fmt.Sprintf("db-%d", i)
		pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-" + name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, flockbootstrap.Claim{Name: pvc.Name, UID: string(pvc.UID)})
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"test.flockd.io/no-such-node": "true"},
				Containers: []corev1.Container{{Name: "app", Image: "app"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	clients := make([]kubernetes.Interface, members)
	for i := range clients {
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = cs
	}
	ps := make([]peer.Peer, members)
	for i := range members {
		ps[i] = peer.Peer{FQDN: fmt.Sprintf("db-%d.db.%s.svc.%s", i, ns, c.Domain), Name: fmt.Sprintf("db-%d", i), Ordinal: i, Ready: true}
	}
	set := peer.NewSet(ps...)
	for round := range rounds {
		lease := fmt.Sprintf("rank-%d", round)
		shutDownLease(ctx, t, c.Client, ns, lease, ps[0].FQDN, claims)
		ranks := make([]int, members)
		failing, quorum := -1, 0
		if round%3 == 2 {
			failing, quorum = rand.IntN(members), members-1
		}
		best := -1
		for i := range ranks {
			ranks[i] = rand.IntN(4) - 1 // -1 (no data) to 2: ties are frequent
			if i != failing && (best < 0 || ranks[i] > ranks[best]) {
				best = i
			}
		}
		roles, formers := make([]string, members), make([]string, members)
		errs := make([]error, members)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range members {
			argv := []string{"echo", strconv.Itoa(ranks[i])}
			if i == failing {
				argv = []string{"false"}
			}
			r := &flockbootstrap.Roler{
				Lease: &flockbootstrap.Lease{Leases: clientset.Wrap(clients[i]).Leases, Namespace: ns, Name: lease},
				Data:  &flockbootstrap.Data{Client: clientset.Wrap(clients[i]), Namespace: ns},
				Pod:   ps[i].Name, Rank: flockbootstrap.RankCommand(argv), RankQuorum: quorum,
				Size: func() int { return members },
			}
			wg.Go(func() {
				<-start
				for {
					roles[i], formers[i], errs[i] = r.Bootstrap(ctx, set, ps[i].FQDN)
					// Like the engine, retry any failure before the first
					// role (no role yet, or conflicts beyond decide's own).
					if errs[i] == nil || ctx.Err() != nil {
						return
					}
					select { // the engine's retry, shortened
					case <-ctx.Done():
					case <-time.After(time.Duration(10+rand.IntN(40)) * time.Millisecond):
					}
				}
			})
		}
		close(start)
		wg.Wait()
		var formed []int
		for i := range members {
			switch {
			case errs[i] != nil:
				t.Fatalf("round %d: member %d: %v", round, i, errs[i])
			case roles[i] == "form":
				formed = append(formed, i)
			case roles[i] != "join":
				t.Fatalf("round %d: member %d told %q", round, i, roles[i])
			}
		}
		if len(formed) != 1 || formed[0] != best {
			t.Fatalf("round %d: ranks %v (failing %d, quorum %d): members %v told form, want exactly db-%d", round, ranks, failing, quorum, formed, best)
		}
		rec, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || rec.Spec.HolderIdentity == nil || *rec.Spec.HolderIdentity != ps[best].Name {
			t.Fatalf("round %d: lease %+v, %v; want db-%d recorded", round, rec, err, best)
		}
		for i, f := range formers {
			if f != ps[best].FQDN {
				t.Fatalf("round %d: member %d was given former %q, want %s", round, i, f, ps[best].FQDN)
			}
		}
	}
	t.Logf("%d cold starts of %d racing members: exactly one form in each, the highest rank", rounds, members)
}

// shutDownLease creates the Lease of a cluster formed by db-0 of an earlier
// pod, every member's claim recorded.
func shutDownLease(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, former string, claims []flockbootstrap.Claim) {
	t.Helper()
	var ms []flockbootstrap.Member
	for i, cl := range claims {
		ms = append(ms, flockbootstrap.Member{Pod: fmt.Sprintf("db-%d", i), UID: fmt.Sprintf("old-%d", i), Claims: []flockbootstrap.Claim{cl}})
	}
	b, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	holder := "db-0"
	_, err = cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			flockbootstrap.AnnotationUID: "old-0", flockbootstrap.AnnotationMember: former, flockbootstrap.AnnotationMembers: string(b)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
