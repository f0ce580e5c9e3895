package endpointslice

import (
	"fmt"
	"reflect"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/sourcetest"
	"github.com/flockd/flock/peerfinder/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ptr[T any](v T) *T { return &v }

var opts = Options{Service: "web", Namespace: "db", Domain: "cluster.local."}

// ep builds an endpoint of a StatefulSet pod with the given conditions.
func ep(host string, ready, terminating bool, addrs ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses: addrs,
		Hostname:  ptr(host),
		Conditions: discoveryv1.EndpointConditions{
			Ready: ptr(ready), Serving: ptr(ready), Terminating: ptr(terminating),
		},
		NodeName:  ptr("node-1"),
		Zone:      ptr("zone-a"),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: host, UID: types.UID("uid-" + host)},
	}
}

func slice(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "db",
			Labels:        map[string]string{discoveryv1.LabelServiceName: "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("peer"), Port: ptr(int32(2888)), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}

func slims(t *testing.T, ess ...*discoveryv1.EndpointSlice) []*Slice {
	t.Helper()
	var out []*Slice
	for _, es := range ess {
		o, err := Slim(es)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Slim(o)
		if err != nil || again != o {
			t.Fatalf("Slim is not idempotent: %v", err)
		}
		out = append(out, o.(*Slice))
	}
	return out
}

func fqdns(ps []peer.Peer) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.FQDN)
	}
	return out
}

func TestPeersSelection(t *testing.T) {
	const sfx = ".web.db.svc.cluster.local"
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		notRdy bool
		want   []string
	}{
		{"empty", nil, false, []string{}},
		{"ready only by default", []*discoveryv1.EndpointSlice{slice("a",
			ep("web-0", true, false, "10.0.0.1"), ep("web-1", false, false, "10.0.0.2"))}, false,
			[]string{"web-0" + sfx}},
		{"include not ready", []*discoveryv1.EndpointSlice{slice("a",
			ep("web-0", true, false, "10.0.0.1"), ep("web-1", false, false, "10.0.0.2"))}, true,
			[]string{"web-0" + sfx, "web-1" + sfx}},
		{"terminating leaves even when ready (publishNotReadyAddresses)", []*discoveryv1.EndpointSlice{slice("a",
			ep("web-0", true, false, "10.0.0.1"), ep("web-1", true, true, "10.0.0.2"))}, true,
			[]string{"web-0" + sfx}},
		{"no addresses skipped", []*discoveryv1.EndpointSlice{slice("a", ep("web-0", true, false))}, true, []string{}},
		{"across slices sorted", []*discoveryv1.EndpointSlice{
			slice("b", ep("web-2", true, false, "10.0.0.3")), slice("a", ep("web-10", true, false, "10.0.0.4"))}, false,
			[]string{"web-10" + sfx, "web-2" + sfx}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			o.IncludeNotReady = tt.notRdy
			got := fqdns(Peers(slims(t, tt.slices...), o))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPeersFields(t *testing.T) {
	v6 := slice("b", ep("web-0", true, false, "fd00::1"))
	v6.AddressType = discoveryv1.AddressTypeIPv6
	noHost := ep("", true, false, "10.0.0.7")
	noHost.Hostname = nil
	noHost.TargetRef.Name = "api-7d9f8-x2k9p"
	bare := discoveryv1.Endpoint{Addresses: []string{"10.0.0.9"}} // conditions unset: ready
	got := Peers(slims(t,
		slice("a", ep("web-0", true, false, "10.0.0.1"), noHost, bare),
		v6,
	), opts)
	want := []peer.Peer{
		{FQDN: "10-0-0-9.web.db.svc.cluster.local", Name: "10-0-0-9", IPs: []string{"10.0.0.9"},
			Ready: true, Serving: true, Ordinal: -1, Ports: []peer.Port{{Name: "peer", Port: 2888, Protocol: "TCP"}}},
		{FQDN: "api-7d9f8-x2k9p.web.db.svc.cluster.local", Name: "api-7d9f8-x2k9p", IPs: []string{"10.0.0.7"},
			Ready: true, Serving: true, Pod: "api-7d9f8-x2k9p", UID: "uid-", Node: "node-1", Zone: "zone-a",
			Ordinal: -1, Ports: []peer.Port{{Name: "peer", Port: 2888, Protocol: "TCP"}}},
		{FQDN: "web-0.web.db.svc.cluster.local", Name: "web-0", IPs: []string{"10.0.0.1", "fd00::1"},
			Ready: true, Serving: true, Pod: "web-0", UID: "uid-web-0", Node: "node-1", Zone: "zone-a",
			Ordinal: 0, Ports: []peer.Port{{Name: "peer", Port: 2888, Protocol: "TCP"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestPeersNameClaimedByTwoPods(t *testing.T) {
	oldPod := ep("web-0", false, false, "10.0.0.1")
	newPod := ep("web-0", true, false, "10.0.0.2")
	newPod.TargetRef.UID = "uid-new"
	for _, order := range [][]discoveryv1.Endpoint{{oldPod, newPod}, {newPod, oldPod}} {
		got := Peers(slims(t, slice("a", order...)), Options{Service: "web", Namespace: "db", Domain: "cluster.local", IncludeNotReady: true})
		if len(got) != 1 || got[0].UID != "uid-new" || !reflect.DeepEqual(got[0].IPs, []string{"10.0.0.2"}) {
			t.Errorf("got %+v, want only the ready pod uid-new with its own IP", got)
		}
	}
}

func TestSlimKeepsNoMetadata(t *testing.T) {
	s := slims(t, slice("a", ep("web-0", true, false, "10.0.0.1")))[0]
	if s.Labels != nil || s.ManagedFields != nil || s.Name != "a" || s.Namespace != "db" {
		t.Errorf("slim object keeps %+v", s.ObjectMeta)
	}
}

// TestRunFollowsChanges drives the informer through a fake clientset.
func TestRunFollowsChanges(t *testing.T) {
	client := fake.NewClientset(slice("a", ep("web-0", true, false, "10.0.0.1")))
	other := slice("other", ep("x-0", true, false, "10.0.9.9"))
	other.Labels[discoveryv1.LabelServiceName] = "other"
	if _, err := client.DiscoveryV1().EndpointSlices("db").Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := New(Config{Client: clientset.Wrap(client), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	run := sourcetest.Start(t, "endpointslice", src)
	expect := func(want ...string) {
		t.Helper()
		run.Wait(t, await.Timeout, fmt.Sprint(want), func(ps []peer.Peer) bool { return reflect.DeepEqual(fqdns(ps), want) })
	}
	expect("web-0.web.db.svc.cluster.local")
	b := slice("b", ep("web-1", true, false, "10.0.0.2"))
	if _, err := client.DiscoveryV1().EndpointSlices("db").Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("web-0.web.db.svc.cluster.local", "web-1.web.db.svc.cluster.local")
	if err := client.DiscoveryV1().EndpointSlices("db").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("web-1.web.db.svc.cluster.local")

	ps, err := src.Lookup(ctx)
	if err != nil || !reflect.DeepEqual(fqdns(ps), []string{"web-1.web.db.svc.cluster.local"}) {
		t.Errorf("Lookup = %v, %v", fqdns(ps), err)
	}
}
