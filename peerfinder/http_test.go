package peerfinder

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/engine"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/flockd/flock/peerfinder/source/static"
	"github.com/flockd/flock/peerfinder/status"
)

// openCounter is a listener that counts the connections it accepted that
// are still open, and the most that were open at once.
type openCounter struct {
	net.Listener
	mu        sync.Mutex
	open, max int
}

func (l *openCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.open++
	l.max = max(l.max, l.open)
	l.mu.Unlock()
	return &countedConn{Conn: c, l: l}, nil
}

func (l *openCounter) maxOpen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

type countedConn struct {
	net.Conn
	l    *openCounter
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// bound is the generous limit of every wait below; nothing is timed closer.
const bound = 20 * time.Second

// TestMetricsServerBoundsIdleConnections (issue 36 #4): connections that
// never finish their headers were held forever (5,000 cost 78 MB and, at
// the fd limit, broke DNS lookups and file sinks). They are closed after
// the header timeout, no more than MaxConns are served at once (the others
// wait in the backlog), a normal client still gets /healthz, and an idle
// keep-alive connection is closed after the idle timeout.
func TestMetricsServerBoundsIdleConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counted := &openCounter{Listener: ln}
	limits := defaultServerLimits
	limits.ReadHeaderTimeout, limits.IdleTimeout, limits.MaxConns = 100*time.Millisecond, 100*time.Millisecond, 4
	reg := prometheus.NewRegistry()
	srv := serveOn(counted, &pipeline{registry: reg}, limits, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	idle := make([]net.Conn, 40)
	for i := range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		idle[i] = c
	}
	client := &http.Client{Timeout: bound}
	await.Until(t, func() bool { // refused while the cap is taken
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "/healthz behind %d idle connections", len(idle))
	client.CloseIdleConnections()
	deadline := time.Now().Add(bound)
	for i, c := range idle {
		_ = c.SetReadDeadline(deadline)
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("idle connection %d of %d still open after %v: no header timeout", i, len(idle), bound)
		}
	}
	// The cap, plus the one being refused.
	if m := counted.maxOpen(); m > limits.MaxConns+1 {
		t.Errorf("%d connections were open at once, want at most %d served", m, limits.MaxConns)
	}
	if n := refusedCount(t, reg); n == 0 {
		t.Errorf("no connection refused beyond the cap of %d", limits.MaxConns)
	}

	// A keep-alive connection left idle after a request is closed.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(bound))
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := r.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("keep-alive connection still open %v after its response: no idle timeout", bound)
	}
}

// refusedCount reads flock_http_refused_connections_total from reg.
func refusedCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "flock_http_refused_connections_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no flock_http_refused_connections_total")
	return 0
}

// warnSink applies every set, fails while failing is set, and has a
// standing warning.
type warnSink struct{ failing bool }

func (s *warnSink) Apply(context.Context, sink.Delivery) error {
	if s.failing {
		return errors.New("disk full")
	}
	return nil
}
func (s *warnSink) Warnings() []string { return []string{"another writer"} }

// TestStatusServesWhatWasDelivered: /status is the JSON document of what
// the engine delivered last (set, generation, role, former), its verdict,
// its sinks and their warnings; while a sink that holds back the others
// fails, heldBy names it.
func TestStatusServesWhatWasDelivered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failing bool
	}{{"delivered", false}, {"sink failing", true}} {
		t.Run(tc.name, func(t *testing.T) {
			self := "web-0.web.ns.svc.cluster.local"
			sinks := []engine.NamedSink{{Name: "hosts-file", Sink: &warnSink{failing: tc.failing}}}
			e := engine.New(engine.Config{
				Sources:    []engine.NamedSource{{Name: "static", Source: static.Source{Peers: static.Names(self, "web-1.web.ns.svc.cluster.local")}}},
				Sinks:      sinks,
				Membership: membership.Options{Self: self},
				Role: func(context.Context, peer.Set, string) (string, string, error) {
					return "join", "web-1.web.ns.svc.cluster.local", nil
				},
			})
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- e.Run(ctx) }()
			defer func() { cancel(); await.Recv(t, errc, "Run to return") }()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			p := &pipeline{engine: e, registry: prometheus.NewRegistry(), sinks: sinks, opts: membership.Options{Self: self}}
			srv := serveOn(ln, p, defaultServerLimits, slog.New(slog.DiscardHandler))
			t.Cleanup(func() { _ = srv.Close() })

			var doc status.Document
			await.Until(t, func() bool {
				resp, err := http.Get("http://" + ln.Addr().String() + "/status")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				doc = status.Document{}
				return resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "application/json" &&
					json.NewDecoder(resp.Body).Decode(&doc) == nil && (doc.Ready || doc.HeldBy != nil)
			}, "/status to show a delivery or a hold")
			if doc.Version != status.DocumentVersion || doc.Self != self || doc.Generation != 1 || doc.Verdict.Reason != "publish" ||
				!slices.Equal(doc.Warnings, []string{"hosts-file: another writer"}) {
				t.Errorf("document %+v", doc)
			}
			if tc.failing {
				if doc.Ready || doc.Delivered != nil || *doc.HeldBy != (status.Hold{Gate: status.GateSinkFailing, Detail: "hosts-file: disk full"}) ||
					doc.Sinks[0] != (status.Sink{Name: "hosts-file", State: "failing", HoldsBack: true, Error: "disk full"}) {
					t.Errorf("document while the sink fails: %+v (delivered %+v, held by %+v)", doc, doc.Delivered, doc.HeldBy)
				}
				return
			}
			d := doc.Delivered
			if !doc.Ready || doc.HeldBy != nil || d == nil || d.Generation != 1 || d.At.IsZero() || d.Bootstrap != "join" ||
				d.Former != "web-1.web.ns.svc.cluster.local" || !slices.Equal(d.Peers, []string{self, "web-1.web.ns.svc.cluster.local"}) ||
				doc.Sinks[0] != (status.Sink{Name: "hosts-file", State: "ok", HoldsBack: true}) {
				t.Errorf("document %+v, delivered %+v, held by %+v", doc, d, doc.HeldBy)
			}
		})
	}
}
