package peer

import (
	"slices"
	"testing"
)

func TestNewSetSortsAndMerges(t *testing.T) {
	s := NewSet(
		Peer{FQDN: "b.svc", IPs: []string{"10.0.0.2"}},
		Peer{FQDN: "a.svc", IPs: []string{"10.0.0.9", "10.0.0.1", "10.0.0.1"}},
		Peer{FQDN: "b.svc", IPs: []string{"fd00::2"}, Ready: true, Ports: []Port{{Name: "p", Port: 1}}},
		Peer{Name: "c"},
		Peer{}, // no key: dropped
	)
	if got, want := s.Keys(), []string{"a.svc", "b.svc", "c"}; !slices.Equal(got, want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	a, _ := s.Get("a.svc")
	if want := []string{"10.0.0.1", "10.0.0.9"}; !slices.Equal(a.IPs, want) {
		t.Errorf("a IPs = %v, want %v", a.IPs, want)
	}
	b, ok := s.Get("b.svc")
	if !ok || !b.Ready || !slices.Equal(b.IPs, []string{"10.0.0.2", "fd00::2"}) || len(b.Ports) != 1 {
		t.Errorf("b merged = %+v", b)
	}
	if s.Has("d") {
		t.Errorf("Has(d) = true")
	}
}

func TestSetEqual(t *testing.T) {
	a := NewSet(Peer{FQDN: "x", IPs: []string{"1.1.1.1"}}, Peer{FQDN: "y"})
	b := NewSet(Peer{FQDN: "y"}, Peer{FQDN: "x", IPs: []string{"1.1.1.1"}})
	c := NewSet(Peer{FQDN: "y"}, Peer{FQDN: "x", IPs: []string{"1.1.1.2"}})
	if !a.Equal(b) {
		t.Errorf("a != b")
	}
	if a.Equal(c) {
		t.Errorf("a == c although an IP differs")
	}
	if !(Set{}).Equal(NewSet()) {
		t.Errorf("zero set != empty set")
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		old, new       []string
		added, removed []string
	}{
		{nil, []string{"a", "b"}, []string{"a", "b"}, nil},
		{[]string{"a", "b"}, nil, nil, []string{"a", "b"}},
		{[]string{"a", "c", "e"}, []string{"b", "c", "d"}, []string{"b", "d"}, []string{"a", "e"}},
		{[]string{"a"}, []string{"a"}, nil, nil},
	}
	for _, tt := range tests {
		added, removed := Diff(set(tt.old...), set(tt.new...))
		if !slices.Equal(added, tt.added) || !slices.Equal(removed, tt.removed) {
			t.Errorf("Diff(%v, %v) = +%v -%v, want +%v -%v", tt.old, tt.new, added, removed, tt.added, tt.removed)
		}
	}
}

func set(keys ...string) Set {
	ps := make([]Peer, len(keys))
	for i, k := range keys {
		ps[i] = Peer{FQDN: k}
	}
	return NewSet(ps...)
}

func TestSame(t *testing.T) {
	a := NewSet(Peer{FQDN: "a.svc"}, Peer{FQDN: "b.svc"})
	b := NewSet(Peer{FQDN: "a.svc"}, Peer{FQDN: "b.svc"})
	c := a
	if !a.Same(c) || !a.Equal(c) {
		t.Error("a copy is not the same set")
	}
	if a.Same(b) || !a.Equal(b) {
		t.Errorf("equal sets built apart: Same %v Equal %v, want false and true", a.Same(b), a.Equal(b))
	}
	if !(Set{}).Same(NewSet()) {
		t.Error("empty sets are not the same")
	}
}
