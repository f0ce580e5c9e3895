package apps

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"
)

// lingering is a remotecommand.Executor that behaves as client-go's SPDY
// executor does when ctx ends first: StreamWithContext returns ctx's error
// while its copy goroutines still write the command's output.
type lingering struct{ wrote chan struct{} }

func (l lingering) Stream(remotecommand.StreamOptions) error { panic("not used") }

func (l lingering) StreamWithContext(ctx context.Context, o remotecommand.StreamOptions) error {
	go func() {
		defer close(l.wrote)
		for range 200 {
			_, _ = o.Stdout.Write([]byte("out\n"))
			_, _ = o.Stderr.Write([]byte("err\n"))
			time.Sleep(time.Millisecond)
		}
	}()
	<-ctx.Done()
	return ctx.Err()
}

// The output of a command whose context ended is read while the executor
// may still write it: no data race (go test -race), and what was printed so
// far is returned.
func TestStreamAfterTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	l := lingering{wrote: make(chan struct{})}
	out, err := stream(ctx, l)
	<-l.wrote
	if err == nil {
		t.Error("no error after the context ended")
	}
	if !strings.HasPrefix(out, "out\n") {
		t.Errorf("output %q, want what was printed before the timeout", out)
	}
}
