package main

import (
	"strings"
	"testing"
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
