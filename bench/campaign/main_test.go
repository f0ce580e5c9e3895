package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/localcluster/apps"
)

const corefile = `.:5353 {
    bind 127.0.0.1
    errors
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        ttl 0
    }
}
`

// TestWithCacheIsIdempotent: a Corefile a stopped campaign left cached is
// put back first, never cached twice (CoreDNS would not start).
func TestWithCacheIsIdempotent(t *testing.T) {
	plain, cached, err := withCache(corefile)
	if err != nil {
		t.Fatal(err)
	}
	if plain != corefile || strings.Count(cached, "cache 30") != 1 || !strings.Contains(cached, "ttl 30") || strings.Contains(cached, "ttl 0") {
		t.Fatalf("withCache(plain) = %q, %q", plain, cached)
	}
	plain2, cached2, err := withCache(cached)
	if err != nil {
		t.Fatal(err)
	}
	if plain2 != plain || cached2 != cached {
		t.Fatalf("withCache(cached) = %q, %q; want the same as from the plain Corefile", plain2, cached2)
	}
	if _, _, err := withCache(strings.Replace(corefile, "    errors\n", "", 1)); err == nil {
		t.Fatal("withCache of a Corefile without an errors line: no error")
	}
}

func TestHeadToHead(t *testing.T) {
	o := func(round int, policy string, healthy time.Duration) apps.Outcome {
		return apps.Outcome{Plan: apps.Plan{Round: round, Policy: policy}, Healthy: healthy}
	}
	flock := []apps.Outcome{o(0, "Parallel", 50*time.Second), o(1, "OrderedReady", 60*time.Second), o(2, "Parallel", 40*time.Second), o(3, "Parallel", 30*time.Second), o(4, "OrderedReady", 0)}
	upstream := []apps.Outcome{o(2, "Parallel", 30*time.Second), o(1, "OrderedReady", 90*time.Second), o(0, "Parallel", 70*time.Second), o(4, "OrderedReady", 80*time.Second)}
	rows := headToHead(flock, upstream)
	// Round 3 has no upstream outcome and round 4 no healthy flock one:
	// neither counts.
	if len(rows) != 2 || rows[0].policy != "OrderedReady" || rows[0].rounds != 1 || rows[0].flockFirst != 1 || !slices.Equal(rows[0].diffs, []time.Duration{30 * time.Second}) ||
		rows[1].policy != "Parallel" || rows[1].rounds != 2 || rows[1].flockFirst != 1 || !slices.Equal(rows[1].diffs, []time.Duration{-10 * time.Second, 20 * time.Second}) {
		t.Fatalf("headToHead = %+v", rows)
	}
}

// TestParseSubjects: flock, upstream or both, nothing else.
func TestParseSubjects(t *testing.T) {
	for _, c := range []struct {
		list string
		want []string
		bad  bool
	}{
		{"flock", []string{apps.Flock}, false},
		{"upstream,flock", []string{apps.Upstream, apps.Flock}, false},
		{"flock,kubernetes", nil, true},
		{"", nil, true},
	} {
		got, err := parseSubjects(c.list)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("parseSubjects(%q) = %q, %v; want %q, error %v", c.list, got, err, c.want, c.bad)
		}
	}
}
