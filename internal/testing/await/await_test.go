package await

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of stopping the goroutine for good.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func fails(f func(t testing.TB)) (msg string) {
	ft := &fakeT{}
	defer func() {
		if r := recover(); r != nil && r != any(ft) {
			panic(r)
		}
		msg = ft.msg
	}()
	f(ft)
	return ""
}

func TestRecvAndSend(t *testing.T) {
	ch := make(chan int, 1)
	Send(t, ch, 7, "seven")
	if got := Recv(t, ch, "seven"); got != 7 {
		t.Fatalf("Recv = %d", got)
	}
	close(ch)
	if msg := fails(func(t testing.TB) { Recv(t, ch, "a closed channel") }); !strings.Contains(msg, "closed") {
		t.Errorf("Recv on a closed channel: %q", msg)
	}
	done := make(chan struct{})
	close(done)
	Done(t, done, "a closed channel")
	n := 0
	Until(t, func() bool { n++; return n == 3 }, "three calls")
}

func TestCheckSaysTheLastState(t *testing.T) {
	n := 0
	Check(t, func() error {
		if n++; n < 3 {
			return fmt.Errorf("%d calls", n)
		}
		return nil
	}, "three calls")
	p := Poll{Timeout: 20 * time.Millisecond, Every: time.Millisecond}
	msg := fails(func(t testing.TB) {
		p.Check(t, func() error { n++; return fmt.Errorf("at %d", n) }, "%s", "never")
	})
	if !strings.Contains(msg, "for never: at ") {
		t.Fatalf("Check that never holds: %q, want what and the last error", msg)
	}
	if msg := fails(func(t testing.TB) { p.Until(t, func() bool { return false }, "never") }); !strings.HasSuffix(msg, "for never") {
		t.Fatalf("Until that never holds: %q", msg)
	}
}
