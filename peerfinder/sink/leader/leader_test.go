package leader

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/sink/hostsfile"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// klog's flush daemon, started by client-go's import of klog.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// recorder is an inner sink that records the generations it applied and can
// be told to fail.
type recorder struct {
	mu    sync.Mutex
	gens  []uint64
	fails int // fail this many more Applies
}

func (r *recorder) Apply(_ context.Context, d sink.Delivery) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fails > 0 {
		r.fails--
		return errors.New("injected failure")
	}
	r.gens = append(r.gens, d.Generation)
	return nil
}

func (r *recorder) applied() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.gens...)
}

func newSink(t *testing.T, client kubernetes.Interface, id string, inner sink.Sink) *Sink {
	t.Helper()
	s, err := New(Config{
		Inner: inner, Client: clientset.Wrap(client), Namespace: "ns", Name: "hosts-writer", Identity: id,
		LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, s *Sink) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	return func() { cancel(); await.Done(t, done, "the campaign to end after cancel") }
}

// leaseActions counts the requests with verb on Leases client has served:
// the election's progress, for checks that something did not happen.
func leaseActions(client *fake.Clientset, verb string) int {
	return len(slices.DeleteFunc(client.Actions(), func(a k8stesting.Action) bool { return !a.Matches(verb, "leases") }))
}

func delivery(gen uint64) sink.Delivery {
	return sink.Delivery{Set: peer.NewSet(peer.Peer{FQDN: "a.svc", IPs: []string{"10.0.0.1"}}), Self: "a.svc", Generation: gen}
}

func TestOnlyLeaderAppliesAndTakeoverAppliesNewest(t *testing.T) {
	client := fake.NewClientset()
	ra, rb := &recorder{}, &recorder{}
	a, b := newSink(t, client, "a", ra), newSink(t, client, "b", rb)
	ctx := context.Background()

	stopA := run(t, a)
	await.Until(t, a.Leading, "a leading")
	stopB := run(t, b)
	defer stopB()

	for gen := uint64(1); gen <= 3; gen++ {
		for _, s := range []*Sink{a, b} {
			if err := s.Apply(ctx, delivery(gen)); err != nil {
				t.Fatalf("%s Apply(%d): %v", s.Identity(), gen, err)
			}
		}
	}
	if got := ra.applied(); len(got) != 3 {
		t.Errorf("leader applied %v, want generations 1..3", got)
	}
	if got := rb.applied(); len(got) != 0 || b.Leading() {
		t.Fatalf("follower applied %v (leading %v), want nothing", got, b.Leading())
	}

	// b fails once when taking over: retried, then the newest set lands.
	rb.mu.Lock()
	rb.fails = 1
	rb.mu.Unlock()
	stopA() // releases the Lease
	await.Until(t, func() bool { return len(rb.applied()) == 1 }, "b to take over and apply the newest set")
	if got := rb.applied(); got[0] != 3 {
		t.Errorf("b applied %v on taking over, want [3]", got)
	}
	if a.Leading() {
		t.Error("a still leading after it stopped")
	}
	if err := b.Apply(ctx, delivery(4)); err != nil {
		t.Fatal(err)
	}
	if got := rb.applied(); len(got) != 2 || got[1] != 4 {
		t.Errorf("b applied %v, want [3 4]", got)
	}
	// No duplicate catch-up of an applied set while b goes on leading:
	// three renewals later, still [3 4].
	renewed := leaseActions(client, "update")
	await.Until(t, func() bool { return leaseActions(client, "update") >= renewed+3 }, "b to renew the Lease 3 times")
	if got := rb.applied(); !slices.Equal(got, []uint64{3, 4}) {
		t.Errorf("b applied %v, want [3 4]", got)
	}
}

// TestFollowGatesFollowers: while another candidate leads, Apply returns
// Follow's result and never touches Inner.
func TestFollowGatesFollowers(t *testing.T) {
	client := fake.NewClientset()
	a := newSink(t, client, "a", &recorder{})
	stopA := run(t, a)
	defer stopA()
	await.Until(t, a.Leading, "a leading")

	inner, follow := &recorder{}, &recorder{fails: 1}
	b, err := New(Config{Inner: inner, Follow: follow, Client: clientset.Wrap(client), Namespace: "ns", Name: "hosts-writer", Identity: "b",
		LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopB := run(t, b)
	defer stopB()
	ctx := context.Background()
	if err := b.Apply(ctx, delivery(1)); err == nil {
		t.Fatal("following Apply succeeded although Follow failed")
	}
	if err := b.Apply(ctx, delivery(2)); err != nil {
		t.Fatalf("following Apply: %v", err)
	}
	if got := follow.applied(); len(got) != 1 || got[0] != 2 {
		t.Errorf("Follow applied %v, want [2]", got)
	}
	if got := inner.applied(); len(got) != 0 {
		t.Errorf("Inner applied %v while following", got)
	}
}

func TestNewValidates(t *testing.T) {
	client := clientset.Wrap(fake.NewClientset())
	for name, cfg := range map[string]Config{
		"no inner":  {Client: client, Namespace: "ns", Name: "x"},
		"no client": {Inner: &recorder{}, Namespace: "ns", Name: "x"},
		"no name":   {Inner: &recorder{}, Client: client, Namespace: "ns"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	s, err := New(Config{Inner: &recorder{}, Client: client, Namespace: "ns", Name: "x"})
	if err != nil || s.Identity() == "" {
		t.Errorf("New with defaults = %v, identity %q", err, s.Identity())
	}
}

// TestTakeoverOnlyAfterExpiry: a leader that died without releasing the
// Lease is replaced only once its record stayed unchanged for its duration.
func TestTakeoverOnlyAfterExpiry(t *testing.T) {
	holder, secs := "dead", int32(3)
	now := metav1.NewMicroTime(time.Now())
	client := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "hosts-writer", Namespace: "ns"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now, AcquireTime: &now}})
	b := newSink(t, client, "b", &recorder{})
	stop := run(t, b)
	defer stop()
	// Several tries to acquire (each reads the Lease), well inside the 3s
	// lease: none takes it over.
	await.Until(t, func() bool { return leaseActions(client, "get") >= 3 }, "b to try to acquire the Lease 3 times")
	if b.Leading() {
		t.Fatal("b took over a Lease that had not expired")
	}
	await.Until(t, b.Leading, "b to take over the expired Lease")
	l, err := client.CoordinationV1().Leases("ns").Get(context.Background(), "hosts-writer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *l.Spec.HolderIdentity; got != "b" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 {
		t.Errorf("lease holder %q transitions %v, want b and 1", got, l.Spec.LeaseTransitions)
	}
}

// warner is an inner sink with warnings.
type warner struct{ recorder }

func (*warner) Warnings() []string { return []string{"another writer"} }

// TestWarningsOfTheHolder: the inner sink's warnings are the holder's; a
// follower, whose inner Run does not run, has none.
func TestWarningsOfTheHolder(t *testing.T) {
	client := fake.NewClientset()
	a, b := newSink(t, client, "a", &warner{}), newSink(t, client, "b", &warner{})
	wa, ok := sink.Sink(a).(sink.Warner)
	if !ok {
		t.Fatal("leader.Sink is no sink.Warner: the holder's warnings never reach /readyz")
	}
	stopA := run(t, a)
	defer stopA()
	await.Until(t, a.Leading, "a leading")
	stopB := run(t, b)
	defer stopB()
	if got := wa.Warnings(); len(got) != 1 {
		t.Errorf("holder's warnings = %q, want the inner sink's", got)
	}
	if got := b.Warnings(); got != nil {
		t.Errorf("follower's warnings = %q, want none", got)
	}
}

// runner is an inner sink with a Run that counts how many of its runs are
// under way and can be told to fail.
type runner struct {
	recorder
	active atomic.Int32
	fail   chan error
}

func (r *runner) Run(ctx context.Context) error {
	r.active.Add(1)
	defer r.active.Add(-1)
	select {
	case <-ctx.Done():
		return nil
	case err := <-r.fail:
		return err
	}
}

// TestInnerRunsWhileLeading: an inner sink.Runner runs only while its
// candidate holds the Lease, stops when leadership ends, and an error it
// returns while leading ends the wrapper's Run with that error.
func TestInnerRunsWhileLeading(t *testing.T) {
	client := fake.NewClientset()
	ra, rb := &runner{fail: make(chan error, 1)}, &runner{fail: make(chan error, 1)}
	a, b := newSink(t, client, "a", ra), newSink(t, client, "b", rb)
	stopA := run(t, a)
	await.Until(t, func() bool { return a.Leading() && ra.active.Load() == 1 }, "a leading with its inner Run under way")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bDone := make(chan error, 1)
	calls := len(client.Actions())
	go func() { bDone <- b.Run(ctx) }()
	// a renews and b tries every 100 ms: a few more calls mean b campaigned.
	await.Until(t, func() bool { return len(client.Actions()) >= calls+6 }, "b to campaign")
	if b.Leading() {
		t.Fatal("b leads while a holds the Lease")
	}
	if n := rb.active.Load(); n != 0 {
		t.Fatalf("follower's inner Run under way (%d)", n)
	}
	stopA()
	if n := ra.active.Load(); n != 0 {
		t.Fatalf("a stopped, its inner Run still under way (%d)", n)
	}
	await.Until(t, func() bool { return b.Leading() && rb.active.Load() == 1 }, "b leading with its inner Run under way")

	boom := errors.New("child exited 3")
	rb.fail <- boom
	select {
	case err := <-bDone:
		if !errors.Is(err, boom) {
			t.Fatalf("b's Run = %v, want the inner Run's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b's Run did not end after its inner Run failed")
	}
}

// TestHolderPreviewsAndRestores: with a real hosts file sink inside, the
// Lease holder previews the expected names before they resolve (a follower
// writes nothing, and a candidate taking over before any Apply previews the
// newest held set), and puts its block back after someone rewrote the file
// (the kubelet, when a container starts).
func TestHolderPreviewsAndRestores(t *testing.T) {
	client := fake.NewClientset()
	const base = "127.0.0.1\tlocalhost\n"
	hosts := func(name string) (*hostsfile.Sink, string) {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(base), 0o644); err != nil {
			t.Fatal(err)
		}
		hf, err := hostsfile.New(hostsfile.Options{Path: path, ID: "web", Expected: []string{"web-0", "web-1"}, KeepInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return hf, path
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	hfA, pathA := hosts("a")
	hfB, pathB := hosts("b")
	a, b := newSink(t, client, "a", hfA), newSink(t, client, "b", hfB)
	pa, ok := sink.Sink(a).(sink.Previewer)
	if !ok {
		t.Fatal("leader.Sink is no sink.Previewer: a held set is never previewed under a Lease")
	}
	pb := sink.Sink(b).(sink.Previewer)
	stopA := run(t, a)
	await.Until(t, a.Leading, "a leading")
	stopB := run(t, b)
	defer stopB()

	web0 := peer.Peer{FQDN: "web-0.web.ns.svc.cluster.local", Name: "web-0", IPs: []string{"10.0.0.1"}, Ready: true, Ordinal: 0}
	web1 := peer.Peer{FQDN: "web-1.web.ns.svc.cluster.local", Name: "web-1", IPs: []string{"10.0.0.2"}, Ready: true, Ordinal: 1}
	held := sink.Delivery{Set: peer.NewSet(web0), Self: web0.FQDN}
	ctx := context.Background()
	for _, p := range []sink.Previewer{pa, pb} {
		if err := p.Preview(ctx, held); err != nil {
			t.Fatalf("Preview: %v", err)
		}
	}
	if got := read(pathA); !strings.Contains(got, "10.0.0.1\tweb-0") || !strings.Contains(got, "web-1") {
		t.Errorf("holder's preview wrote %q, want web-0's address and web-1 listed", got)
	}
	if got := read(pathB); got != base {
		t.Errorf("follower's preview wrote %q", got)
	}

	stopA()
	await.Until(t, func() bool {
		return strings.Contains(read(pathB), "10.0.0.1\tweb-0")
	}, "b to take over and preview the newest held set")
	if err := b.Apply(ctx, sink.Delivery{Set: peer.NewSet(web0, web1), Self: web0.FQDN, Generation: 1, First: true}); err != nil {
		t.Fatal(err)
	}
	if got := read(pathB); !strings.Contains(got, "10.0.0.2\tweb-1") {
		t.Fatalf("holder applied %q, want web-1's address", got)
	}
	// The kubelet writes the file anew; the holder puts its block back.
	if err := os.WriteFile(pathB, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	await.Until(t, func() bool {
		got := read(pathB)
		return strings.Contains(got, "10.0.0.1\tweb-0") && strings.Contains(got, "10.0.0.2\tweb-1")
	}, "the holder to restore its block")
}
