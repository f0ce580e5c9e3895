package main

import "testing"

func TestPkg(t *testing.T) {
	for sym, want := range map[string]string{
		"k8s.io/api/core/v1.(*Pod).Unmarshal":                                   "k8s.io/api/core/v1",
		"runtime.mallocgc":                                                      "runtime",
		"type:.eq.net/http.Request":                                             "net/http",
		"go:itab.*net/http.Transport,net/http.RoundTripper":                     "net/http",
		"slices.Clone[go.shape.[]github.com/flockd/flock/peerfinder/peer.Peer]": "slices",
		"github.com/miekg/dns.init":                                             "github.com/miekg/dns",
		"vendor/golang.org/x/net/http2/hpack.init":                              "vendor/golang.org/x/net/http2/hpack",
	} {
		if got := pkg(sym); got != want {
			t.Errorf("pkg(%q) = %q, want %q", sym, got, want)
		}
	}
}
