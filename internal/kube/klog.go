package kube

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// maxClientGoV is the most verbose client-go log level (logr V) shown at
// debug level; client-go logs every request at V(4) and above.
const maxClientGoV = 2

// Logr returns a logr.Logger for client-go that writes to log at debug level
// only: client-go's own errors (a reflector's failed list or watch, once a
// second while it retries) are reported by WatchReporter as one clear line,
// so their raw form belongs to -v output.
func Logr(log *slog.Logger) logr.Logger {
	return logr.FromSlogHandler(demote{h: log.Handler()})
}

// RouteKlog sends klog's global output (client-go's non-contextual logs)
// through Logr(log). It changes process-wide state; only main calls it.
func RouteKlog(log *slog.Logger) {
	klog.SetLoggerWithOptions(Logr(log.With("component", "client-go")), klog.ContextualLogger(true))
}

// demote is a slog.Handler that logs every record at debug level and drops
// records more verbose than maxClientGoV.
type demote struct{ h slog.Handler }

func (d demote) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= -maxClientGoV && d.h.Enabled(ctx, slog.LevelDebug)
}

func (d demote) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d demote) WithAttrs(as []slog.Attr) slog.Handler { return demote{h: d.h.WithAttrs(as)} }
func (d demote) WithGroup(name string) slog.Handler    { return demote{h: d.h.WithGroup(name)} }
