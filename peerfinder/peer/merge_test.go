package peer

import (
	"fmt"
	"testing"
)

// The same member seen by two sources merges the same whatever the order
// of -source: before, every field but IPs, ports and the conditions came
// from the source listed first, so "-source=dns,pods" lost the pods
// source's ordinal, UID, node and labels, and "-source=pods,dns" kept them
// (issue 12 #3).
func TestNewSetMergeIndependentOfOrder(t *testing.T) {
	fromDNS := Peer{FQDN: "web-0.web.ns.svc.cluster.local", Name: "web-0", IPs: []string{"10.0.0.1"},
		Ready: true, Ordinal: -1, Ports: []Port{{Port: 80}}}
	fromPods := Peer{FQDN: "web-0.web.ns.svc.cluster.local", Name: "web-0", IPs: []string{"10.0.0.1"},
		Ready: true, Serving: true, Pod: "web-0", UID: "u0", Node: "n1", Ordinal: 0,
		Labels: map[string]string{"app": "web"}, Ports: []Port{{Name: "http", Port: 80, Protocol: "TCP"}}}
	fromSlices := Peer{FQDN: "web-0.web.ns.svc.cluster.local", Name: "web-0", IPs: []string{"fd00::1"},
		Ready: false, Terminating: true, Pod: "web-0", UID: "u0", Node: "n1", Zone: "z1", Ordinal: 0}
	orders := [][]Peer{
		{fromDNS, fromPods, fromSlices}, {fromDNS, fromSlices, fromPods}, {fromPods, fromDNS, fromSlices},
		{fromPods, fromSlices, fromDNS}, {fromSlices, fromDNS, fromPods}, {fromSlices, fromPods, fromDNS},
	}
	first, _ := NewSet(orders[0]...).Get(fromDNS.FQDN)
	for _, o := range orders[1:] {
		got, _ := NewSet(o...).Get(fromDNS.FQDN)
		if !got.Equal(first) {
			t.Errorf("merge depends on the order:\n%+v\n%+v", first, got)
		}
	}
	if first.Ordinal != 0 || first.UID != "u0" || first.Node != "n1" || first.Zone != "z1" || first.Labels["app"] != "web" {
		t.Errorf("merged %+v: want the ordinal, UID, node, zone and labels a source knows", first)
	}
	if !first.Ready || first.Terminating {
		t.Errorf("merged Ready %v Terminating %v: want ready, not terminating (one source sees it ready and live)", first.Ready, first.Terminating)
	}
	// Conflicting values (two sources disagree) still give one answer.
	a, b := Peer{FQDN: "x", Node: "n1", Ordinal: 1, Labels: map[string]string{"k": "1"}},
		Peer{FQDN: "x", Node: "n2", Ordinal: 2, Labels: map[string]string{"k": "2", "j": "3"}}
	ab, _ := NewSet(a, b).Get("x")
	ba, _ := NewSet(b, a).Get("x")
	if !ab.Equal(ba) {
		t.Errorf("conflicting values merge by order: %+v vs %+v", ab, ba)
	}
	if s := fmt.Sprint(ab.Labels); s != "map[j:3 k:1]" {
		t.Errorf("labels %s, want the union with the smaller value on a conflict", s)
	}
}

func TestOrdinalFromName(t *testing.T) {
	for name, want := range map[string]int{
		"web-0": 0, "web-12": 12, "my-db-3": 3, "a-b-3": 3, "web": -1, "web-": -1, "-3": -1, "-1": -1,
		"web-01": -1, "web-x": -1, "web-+1": -1, "api-7d9f8-x2k9p": -1,
		"10-1-2-3": -1, "fd00--a-1": -1, "web-99999999999999999999": -1, "web-2147483648": -1,
	} {
		if got := OrdinalFromName(name); got != want {
			t.Errorf("OrdinalFromName(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestOrdinal(t *testing.T) {
	for _, tt := range []struct {
		name, sts string
		labels    map[string]string
		want      int
	}{
		{"web-2", "", map[string]string{PodIndexLabel: "2"}, 2},
		{"train-worker-3-abcde", "", map[string]string{JobCompletionIndexLabel: "3"}, 3},
		{"web-2", "web", map[string]string{PodIndexLabel: "x"}, 2}, // a bad label falls through to the name
		{"web-2", "web", nil, 2},
		{"my-db-7", "my-db", nil, 7},
		{"my-db-7", "db", nil, -1}, // not this StatefulSet's naming
		{"web-2", "", nil, -1},     // not a StatefulSet's pod: the name says nothing
		{"web-02", "web", nil, -1},
		{"web-", "web", nil, -1},
	} {
		if got := Ordinal(tt.name, tt.labels, tt.sts); got != tt.want {
			t.Errorf("Ordinal(%q, %v, %q) = %d, want %d", tt.name, tt.labels, tt.sts, got, tt.want)
		}
	}
}

func TestFQDN(t *testing.T) {
	if got := FQDN("Web-0", "web", "db", "cluster.local."); got != "web-0.web.db.svc.cluster.local" {
		t.Errorf("FQDN = %q", got)
	}
	if got := FQDN("", "web", "db", "cluster.local"); got != "web.db.svc.cluster.local" {
		t.Errorf("service FQDN = %q", got)
	}
}
