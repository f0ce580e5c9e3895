package static

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flockd/flock/internal/atomicfile"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/peerfinder/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func fqdns(ps []peer.Peer) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.FQDN
	}
	return out
}

func start(t *testing.T, s Source) chan []peer.Peer {
	t.Helper()
	up := make(chan []peer.Peer, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, up) }()
	t.Cleanup(func() {
		cancel()
		if err := await.Recv(t, done, "Run to return after cancel"); err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return up
}

func TestFixedListSentOnce(t *testing.T) {
	up := start(t, Source{Peers: Names("b.svc", "a.svc", "b.svc")})
	got := await.Recv(t, up, "the fixed list")
	if want := []string{"a.svc", "b.svc"}; !slices.Equal(fqdns(got), want) {
		t.Errorf("sent %v, want %v (sorted, deduplicated)", fqdns(got), want)
	}
	select {
	case again := <-up:
		t.Errorf("a fixed list sent again: %v", fqdns(again))
	case <-time.After(50 * time.Millisecond):
	}
}

// A file is read again every Period and sent on change; a file that
// cannot be read sends nothing, so the last set stands.
func TestFileSentOnChangeAndKeptOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peers")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("# peers\nweb-0.svc\n\nweb-1.svc\n")
	up := start(t, Source{File: path, Service: "svc", Period: 5 * time.Millisecond})
	if got := fqdns(await.Recv(t, up, "the file's peers")); !slices.Equal(got, []string{"web-0.svc", "web-1.svc"}) {
		t.Fatalf("sent %v", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-up:
		t.Fatalf("a missing file sent %v, want nothing (keep the last set)", fqdns(got))
	case <-time.After(50 * time.Millisecond):
	}
	write("web-2.svc\n")
	if got := fqdns(await.Recv(t, up, "the rewritten file's peers")); !slices.Equal(got, []string{"web-2.svc"}) {
		t.Fatalf("sent %v, want [web-2.svc]", got)
	}
}

func TestLookup(t *testing.T) {
	if _, err := (Source{File: filepath.Join(t.TempDir(), "absent"), Service: "svc"}).Lookup(context.Background()); err == nil {
		t.Error("Lookup of a missing file: nil error")
	}
	ps, err := Source{Peers: Names("x.svc")}.Lookup(context.Background())
	if err != nil || !slices.Equal(fqdns(ps), []string{"x.svc"}) {
		t.Errorf("Lookup = %v, %v", fqdns(ps), err)
	}
}

// A file's entries follow the member and ordinal rules of the other
// sources (issue 36 #5): lower-cased, only the service's own RFC 1123
// members, ordinals by ordinal.FromName; the others are dropped.
func TestFileAppliesMemberRules(t *testing.T) {
	const svc = "web.ns1.svc.cluster.local"
	path := filepath.Join(t.TempDir(), "peers")
	lines := "web-0." + svc + "\nWEB-0." + strings.ToUpper(svc) + "\nWeb-0." + svc + "\nweb-1." + svc + ".\n10-1-2-3." + svc + "\n" +
		"web 2." + svc + "\n$(id)." + svc + "\n-lead." + svc + "\n'q'." + svc + "\nwéb-4." + svc + "\ndb-0.db.ns1.svc.cluster.local\n" + svc + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := Source{File: path, Service: svc}.Lookup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s %s %d", p.FQDN, p.Name, p.Ordinal))
	}
	want := []string{"10-1-2-3." + svc + " 10-1-2-3 -1", "web-0." + svc + " web-0 0", "web-1." + svc + " web-1 1"}
	if !slices.Equal(got, want) {
		t.Errorf("Lookup = %q, want %q", got, want)
	}
}

// A -static-file that is a FIFO or a device, or larger than
// atomicfile.MaxSize, is a failed read (issue 36 #8, #9): Lookup returns an
// error at once instead of blocking in open (a FIFO) or reading until the
// process runs out of memory (/dev/zero), Run sends nothing and returns as
// soon as it is cancelled (SIGTERM), and a good file is read again after.
func TestFileNotRegularOrTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want error
	}{
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, atomicfile.ErrNotRegular},
		{"dev-zero", func(t *testing.T, path string) {
			need.Root(t, "to make a device node")
			if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|5); err != nil { // 1:5, /dev/zero
				need.Unavailable(t, "root", fmt.Sprintf("mknod: %v", err))
			}
		}, atomicfile.ErrNotRegular},
		{"too-large", func(t *testing.T, path string) {
			big := append([]byte("web-0.svc\n"), bytes.Repeat([]byte("# padding\n"), atomicfile.MaxSize/10)...)
			if err := os.WriteFile(path, big, 0o644); err != nil {
				t.Fatal(err)
			}
		}, atomicfile.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "peers")
			tc.make(t, path)
			done := make(chan error, 1)
			go func() {
				_, err := Source{File: path, Service: "svc"}.Lookup(context.Background())
				done <- err
			}()
			if err := await.Recv(t, done, "Lookup of a %s to return", tc.name); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Lookup = %v; want an error wrapping %q naming %s", err, tc.want, path)
			}
			up := start(t, Source{File: path, Service: "svc", Period: 5 * time.Millisecond})
			select {
			case got := <-up:
				t.Errorf("sent %v from a %s", fqdns(got), tc.name)
			case <-time.After(50 * time.Millisecond):
			}
			// start's cleanup cancels Run and waits for it to return.
		})
	}
}
